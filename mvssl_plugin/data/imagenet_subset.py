"""ImageNet-100 (or any list of ImageNet-1k classes) as a tree of symbolic links.

From an ImageNet-1k tree (``train/<wnid>/*.JPEG``; validation either in class folders,
``val/<wnid>/*.JPEG``, or flat, ``val/ILSVRC2012_val_*.JPEG``, with a label file), this
writes ``<out>/train/<wnid>/<file>`` and ``<out>/val/<wnid>/<file>``, each a link to the
original image, the layout solo-learn's ``imagenet100`` and every ``data.format`` read.

The source tree is read by ``imagenet_source`` (its layouts and label files are described there).

Standard library only: no torch, no solo-learn.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from mvssl_plugin.data.imagenet100_classes import IMAGENET100_CLASSES
from mvssl_plugin.data.imagenet_source import (
    WNID,
    Source,
    class_folders,
    find_source,
    is_image,
    label_file,
    listing,
    read_val_labels,
)
from mvssl_plugin.errors import ConfigError

#: ImageNet-1k: 732 to 1300 training images per class, 50 validation images per class
TRAIN_PER_CLASS = (732, 1300)
VAL_PER_CLASS = 50
MANIFEST = "imagenet100.json"
#: what may sit beside train/ and val/ in an output folder (the memory format's default cache)
OUTPUT_EXTRAS = (MANIFEST, ".mvssl_cache")


@dataclass
class Subset:
    """The planned tree: split -> class -> source image paths (sorted)."""

    classes: Tuple[str, ...]
    splits: Dict[str, Dict[str, List[str]]]
    source: Source
    val_layout: str  # "class folders" or the label file's name
    notices: List[str] = field(default_factory=list)

    def count(self, split: str) -> int:
        return sum(len(files) for files in self.splits[split].values())

    def per_class(self, split: str) -> Tuple[int, int]:
        sizes = [len(files) for files in self.splits[split].values()]
        return min(sizes), max(sizes)

    def links(self) -> Dict[str, str]:
        """Relative link path (``train/<wnid>/<file>``) -> absolute target."""
        plan = {}
        for split, classes in self.splits.items():
            for wnid, files in classes.items():
                for path in files:
                    plan[f"{split}/{wnid}/{os.path.basename(path)}"] = path
        return plan


def plan_subset(
    source: Source, classes: Sequence[str] = IMAGENET100_CLASSES, imagenet: Optional[Path] = None
) -> Subset:
    """The images of ``classes`` in ``source``, checked: every class present with at least
    one image in train and in val; a flat val labelled by its label file."""
    classes = tuple(classes)
    if len(set(classes)) != len(classes) or not all(WNID.match(c) for c in classes):
        raise ConfigError("the class list must be distinct WordNet ids")
    train = class_folders("train", source.train, classes)
    with os.scandir(source.train) as entries:
        known = {e.name for e in entries if e.is_dir() and WNID.match(e.name)}
    with os.scandir(source.val) as entries:
        listed = list(entries)
    val_classes = [e.name for e in listed if e.is_dir() and WNID.match(e.name)]
    loose = sorted(os.path.abspath(e.path) for e in listed if is_image(e.name) and e.is_file())
    if val_classes and loose:
        raise ConfigError(
            f"validation folder {source.val} holds both class folders and {len(loose)} loose images: "
            "give a folder of one layout"
        )
    if val_classes:
        val = class_folders("val", source.val, classes)
        layout = "class folders"
    elif loose:
        labels_path = label_file(source, imagenet)
        labels = read_val_labels(labels_path, loose, known)
        val = {wnid: [] for wnid in classes}
        for image in loose:
            if labels[image] in val:
                val[labels[image]].append(image)
        empty = [wnid for wnid, files in val.items() if not files]
        if empty:
            raise ConfigError(
                f"{labels_path} gives no validation image to {len(empty)} of the {len(classes)} classes: "
                f"{listing(empty)}"
            )
        layout = labels_path.name
        source = Source(source.train, source.val, labels_path)
    else:
        raise ConfigError(f"validation folder {source.val} holds neither class folders nor images")
    subset = Subset(classes, {"train": train, "val": val}, source, layout)
    clashes = _duplicate_names(subset)
    if clashes:
        raise ConfigError(f"two images of one class share a file name: {listing(clashes)}")
    low, high = subset.per_class("val")
    if (low, high) != (VAL_PER_CLASS, VAL_PER_CLASS):
        subset.notices.append(
            f"ImageNet-1k has {VAL_PER_CLASS} validation images per class; this tree has {_spread(low, high)}"
        )
    low, high = subset.per_class("train")
    if low < TRAIN_PER_CLASS[0] or high > TRAIN_PER_CLASS[1]:
        subset.notices.append(
            f"ImageNet-1k has {TRAIN_PER_CLASS[0]} to {TRAIN_PER_CLASS[1]} training images per class; "
            f"this tree has {_spread(low, high)}"
        )
    return subset


def _spread(low: int, high: int) -> str:
    return f"{low} per class" if low == high else f"{low} to {high} per class"


def _duplicate_names(subset: Subset) -> List[str]:
    seen: Dict[str, str] = {}
    clashes = []
    for split, classes in subset.splits.items():
        for wnid, files in classes.items():
            for path in files:
                key = f"{split}/{wnid}/{os.path.basename(path)}"
                if key in seen:
                    clashes.append(key)
                seen[key] = path
    return clashes


# ----------------------------------------------------------------------------------------
# Writing the links.


@dataclass
class Outcome:
    """What :func:`write_links` did."""

    added: int = 0
    removed: int = 0
    unchanged: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


def _existing(out: Path) -> Tuple[Dict[str, str], List[str], List[str]]:
    """(link -> its target, real files, other top-level entries) under ``out``'s train/ and val/."""
    links: Dict[str, str] = {}
    files: List[str] = []
    others = []
    if not out.exists():
        return links, files, others
    if not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a folder")
    for entry in sorted(os.listdir(out)):
        if entry in ("train", "val"):
            for folder, dirs, names in os.walk(out / entry):
                for name in names + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
                    path = os.path.join(folder, name)
                    rel = os.path.relpath(path, out).replace(os.sep, "/")
                    if os.path.islink(path):
                        links[rel] = os.readlink(path)
                    else:
                        files.append(rel)
        elif entry not in OUTPUT_EXTRAS:
            others.append(entry)
    return links, files, others


def write_links(subset: Subset, out: Path, replace: bool = False) -> Outcome:
    """Makes ``out`` hold exactly the links of ``subset`` (and its manifest). An ``out`` that
    already holds other links is refused unless ``replace``, which removes links only: real
    files, or other entries in ``out``, are never removed and always refused."""
    out = Path(out)
    plan = subset.links()
    links, files, others = _existing(out)
    if others:
        raise ConfigError(
            f"--out {out} holds other things ({listing(others)}): give a new or empty folder; nothing was changed"
        )
    if files:
        raise ConfigError(
            f"--out {out} holds {len(files)} real file(s) under train/ or val/ (e.g. {files[0]}), not links: "
            "give a new or empty folder; nothing was changed"
        )
    wrong = [rel for rel, target in links.items() if plan.get(rel) != target]
    if wrong and not replace:
        missing = sum(1 for rel in plan if rel not in links)
        raise ConfigError(
            f"--out {out} already holds another tree: {len(wrong)} of its {len(links)} links are not this "
            f"build's (e.g. {wrong[0]}), {missing} of this build's are absent; nothing was changed: give "
            "another --out, or --replace to make its links this build's (only links are removed)"
        )
    outcome = Outcome()
    for rel in wrong:
        os.unlink(out / rel)
        outcome.removed += 1
    made_dirs = set()
    for rel, target in plan.items():
        if links.get(rel) == target:
            outcome.unchanged += 1
            continue
        parent = (out / rel).parent
        if parent not in made_dirs:
            parent.mkdir(parents=True, exist_ok=True)
            made_dirs.add(parent)
        os.symlink(target, out / rel)
        outcome.added += 1
    if outcome.removed:  # class folders left empty by --replace
        for split in ("train", "val"):
            for folder in sorted((out / split).iterdir()) if (out / split).is_dir() else []:
                if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
                    folder.rmdir()
    _write_manifest(subset, out)
    return outcome


def _write_manifest(subset: Subset, out: Path) -> None:
    manifest = {
        "classes": list(subset.classes),
        "classes_source": "solo-learn's solo/data/dataset_subset/imagenet100_classes.txt"
        if subset.classes == IMAGENET100_CLASSES
        else "given",
        "train_source": os.path.abspath(subset.source.train),
        "val_source": os.path.abspath(subset.source.val),
        "val_labels": os.path.abspath(subset.source.val_labels) if subset.source.val_labels else None,
        "train_images": subset.count("train"),
        "val_images": subset.count("val"),
    }
    temporary = out / (MANIFEST + ".part")
    temporary.write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(temporary, out / MANIFEST)


def describe(subset: Subset, out: Path, outcome: Outcome) -> List[str]:
    """The lines the command prints after a build."""
    if outcome.unchanged == 0 and not outcome.removed:
        what = f"built {out}"
    elif outcome.changed:
        what = f"updated {out}"
    else:
        what = f"{out} already holds this build, nothing changed"
    lines = [f"mvssl imagenet100: {what} ({len(subset.classes)} classes)"]
    for split in ("train", "val"):
        spread = _spread(*subset.per_class(split))
        origin = os.path.abspath(subset.source.train if split == "train" else subset.source.val)
        layout = "" if split == "train" else f", {subset.val_layout}"
        lines.append(f"  {split:<5} {subset.count(split)} images, {spread} (from {origin}{layout})")
    if outcome.removed or (outcome.added and outcome.unchanged):
        lines.append(f"  links  {outcome.added} added, {outcome.removed} removed, {outcome.unchanged} kept")
    lines += [f"  note: {notice}" for notice in subset.notices]
    lines.append(f"  train with: data.train_path={out / 'train'} data.val_path={out / 'val'}")
    return lines


def build(
    out: Path,
    imagenet: Optional[Path] = None,
    train: Optional[Path] = None,
    val: Optional[Path] = None,
    val_labels: Optional[Path] = None,
    classes: Sequence[str] = IMAGENET100_CLASSES,
    replace: bool = False,
) -> List[str]:
    """Checks the source tree, writes the links, returns the lines describing what was built."""
    source = find_source(imagenet, train, val, val_labels)
    subset = plan_subset(source, classes, imagenet)
    out = Path(out).absolute()
    for folder in (source.train, source.val):
        if out == Path(folder).absolute() or Path(folder).absolute() in out.parents:
            raise ConfigError(f"--out {out} is inside the ImageNet folder {folder}: give a folder outside it")
    outcome = write_links(subset, out, replace=replace)
    return describe(subset, out, outcome)
