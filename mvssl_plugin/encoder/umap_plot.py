"""A UMAP picture of an exported encoder's features, on a CPU or a GPU: the train and validation
embeddings side by side, coloured by class (solo-learn's ``OfflineUMAP`` picture, whose script
hard-codes ``cuda:0``). Needs umap-learn (``pip install umap-learn``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from mvssl_plugin.encoder.embed import embed_images, find_images
from mvssl_plugin.encoder.model import load_encoder
from mvssl_plugin.errors import ConfigError

PICTURE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg")


def require_umap():
    try:
        import umap  # local: umap-learn is optional (the umap extra), named here when absent
    except ImportError:
        raise ConfigError("UMAP needs umap-learn: pip install umap-learn (or the plugin's [umap] extra)") from None
    return umap


def project(features: Sequence[np.ndarray], seed: int = 0, neighbours: int = 15) -> list:
    """2-D UMAP coordinates of each array of ``features``, all in one embedding (fitted on them all)."""
    umap = require_umap()
    stacked = np.concatenate(features)
    if len(stacked) <= neighbours:
        raise ConfigError(f"{len(stacked)} images: UMAP needs more than n_neighbors = {neighbours}")
    points = umap.UMAP(n_components=2, n_neighbors=neighbours, random_state=seed).fit_transform(stacked)
    bounds = np.cumsum([0] + [len(f) for f in features])
    return [points[a:b] for a, b in zip(bounds, bounds[1:])]


def draw(panels, classes: Optional[Sequence[str]], out: Path, title: str) -> Path:
    """One panel per (name, points [N, 2], labels [N] or None), coloured by class."""
    # local: matplotlib loads only to draw, once the features and the UMAP are done, its Agg backend
    # chosen before pyplot loads
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # local: as matplotlib above

    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 5.5), squeeze=False)
    for ax, (name, points, labels) in zip(axes[0], panels):
        if labels is None:
            ax.scatter(points[:, 0], points[:, 1], s=2, color="C0")
        else:
            for label in np.unique(labels):
                mask = labels == label
                text = classes[label] if classes is not None else str(label)
                ax.scatter(points[mask, 0], points[mask, 1], s=2, color=plt.cm.tab20(label % 20), label=text)
        ax.set_title(f"{name} ({len(points)} images)")
        ax.set_xticks([])
        ax.set_yticks([])
    handles, labels_ = axes[0][0].get_legend_handles_labels()
    if handles and len(handles) <= 20:
        fig.legend(handles, labels_, loc="center right", markerscale=5, fontsize=8)
        fig.subplots_adjust(right=0.88)
    fig.suptitle(title)
    partial = out.with_name(f".{out.stem}.part{out.suffix}")
    fig.savefig(partial, dpi=120)
    plt.close(fig)
    os.replace(partial, out)
    return out


def umap_picture(
    encoder_dir: str | Path,
    train: str | Path,
    out: str | Path,
    val: Optional[str | Path] = None,
    max_images: int = 5000,
    batch_size: int = 256,
    device: str = "auto",
    seed: int = 0,
    force: bool = False,
    notify=print,
) -> Path:
    """Embeds ``train`` (and ``val``), at most ``max_images`` of each (evenly spaced, so every
    class of a sorted ImageFolder tree stays), projects them with one UMAP and draws ``out``."""
    out = Path(out)
    if out.suffix not in PICTURE_SUFFIXES:
        raise ConfigError(f"--out {out}: name a picture file ({', '.join(PICTURE_SUFFIXES)})")
    if out.exists() and not force:
        raise ConfigError(f"--out {out} exists: name a new file, or add --force to replace it")
    if max_images < 2:
        raise ConfigError(f"--max-images {max_images}: must be >= 2")
    require_umap()
    encoder = load_encoder(encoder_dir, "cpu")
    sets = [("train", find_images(train))] + ([("val", find_images(val))] if val is not None else [])
    features, panels_in = [], []
    for name, found in sets:
        keep = np.unique(np.linspace(0, len(found.paths) - 1, min(max_images, len(found.paths))).astype(int))
        paths = [found.paths[i] for i in keep]
        labels = None if found.labels is None else np.array(found.labels)[keep]
        notify(f"mvssl: embedding {len(paths)} of {len(found.paths)} {name} images")
        features.append(embed_images(encoder, paths, batch_size, 0, device))
        panels_in.append((name, labels))
    notify("mvssl: UMAP of the features (umap-learn, on the CPU)")
    points = project(features, seed)
    classes = sets[0][1].classes
    panels = [(name, p, labels) for (name, labels), p in zip(panels_in, points)]
    train_cfg = encoder.mvssl_config["training"]
    title = f"UMAP of {train_cfg['method']} features ({Path(encoder_dir).name})"
    out.parent.mkdir(parents=True, exist_ok=True)
    draw(panels, classes, out, title)
    notify(f"mvssl: UMAP picture written to {out}")
    return out
