"""The offline kNN of a pretraining run: its checkpoint loaded, the backbone / projector
features of both sets computed once, the grid of :func:`~mvssl_plugin.eval.knn_grid.knn_grid`
run over them, and ``knn.csv`` written into the run folder (``main_knn.py`` / ``mvssl-knn``).

Both sets use solo-learn's validation transform, every image of each (no shuffling, no
dropped batch); validation classes are matched to the training classes by folder name.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import List, Optional

from omegaconf import OmegaConf
from torch.utils.data import DataLoader

from mvssl_plugin.data.labelled_sets import classification_datasets
from mvssl_plugin.data.scan import screen_files
from mvssl_plugin.data.transforms import eval_keeps_size
from mvssl_plugin.eval.features import extract_features, load_pretrained
from mvssl_plugin.eval.knn_grid import knn_grid
from mvssl_plugin.files import write_csv
from mvssl_plugin.runs import KNN
from mvssl_plugin.torch_device import eval_device

#: the flag each data path came from, named in the scan's messages
PATH_FLAGS = {"data.train_path": "--train_data_path", "data.val_path": "--val_data_path"}


def run_knn(
    checkpoint: str | Path,
    dataset: str,
    train_path: str | Path,
    val_path: str | Path,
    data_format: str,
    data_fraction: Optional[float],
    feature_types: Sequence[str],
    ks: Sequence[int],
    distances: Sequence[str],
    temperatures: Sequence[float],
    batch_size: int = 256,
    num_workers: int = 2,
    device: str = "auto",
) -> List[dict]:
    """Runs the kNN grid on the run at ``checkpoint`` (a run folder or a ``.ckpt``) and
    writes ``knn.csv`` beside the checkpoint read; returns one row per (feature, k,
    distance, temperature). Arguments are those of ``main_knn.py``, checked by its
    ``check_args``; progress is printed."""
    # local: solo-learn (all of it: seconds) loads when the kNN runs, as in eval.knn.all_classes_knn
    from solo.data.classification_dataloader import prepare_transforms

    torch_device = eval_device(device)
    model, cfg, ckpt = load_pretrained(checkpoint)
    print(f"mvssl: {cfg.method} from {ckpt}; features on {torch_device}", flush=True)
    data_cfg = OmegaConf.create(
        {"data": {"dataset": dataset, "train_path": str(train_path), "val_path": str(val_path), "format": data_format}}
    )
    _, t_val = prepare_transforms(dataset)

    def screen(key: str, files: List[str]) -> List[str]:  # both sets use the val transform
        return screen_files(
            files,
            PATH_FLAGS[key],
            skip_bad=False,
            notify=lambda text: print(f"mvssl: {text}"),
            same_size=eval_keeps_size(dataset),
            skip_key=None,
        )

    train_set, val_set = classification_datasets(data_cfg, t_val, t_val, data_fraction, screen)
    model = model.to(torch_device)
    features = {}
    for name, images in (("train", train_set), ("val", val_set)):
        loader = DataLoader(images, batch_size=batch_size, shuffle=False, num_workers=num_workers)
        features[name] = extract_features(model, loader, torch_device, desc=f"{name} features")
    rows = knn_grid(
        features["train"],
        features["val"],
        feature_types,
        ks,
        distances,
        temperatures,
        report=lambda line: print(line, flush=True),
    )
    out = write_csv(Path(ckpt).parent / KNN, rows)
    print(f"mvssl: kNN results -> {out}")
    return rows
