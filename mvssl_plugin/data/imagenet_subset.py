"""ImageNet-100 (or any list of ImageNet-1k classes) as a tree of symbolic links.

From an ImageNet-1k tree (``train/<wnid>/*.JPEG``; validation either in class folders,
``val/<wnid>/*.JPEG``, or flat, ``val/ILSVRC2012_val_*.JPEG``, with a label file), this
writes ``<out>/train/<wnid>/<file>`` and ``<out>/val/<wnid>/<file>``, each a link to the
original image, the layout solo-learn's ``imagenet100`` and every ``data.format`` read.

Label files of a flat validation folder:

- ``LOC_val_solution.csv`` (the Kaggle ILSVRC release): a header ``ImageId,PredictionString``,
  then one row per image, ``ILSVRC2012_val_00000001,n01751748 <box> [n01751748 <box> ...]``;
  the class is the first word of ``PredictionString``. Found by itself next to the ImageNet
  root or above the validation folder.
- a text file of WordNet ids: one per line in the sorted order of the validation file names
  (``n01751748``), or one ``<file name> <wnid>`` pair per line in any order.

Numeric labels are refused: the devkit's ``ILSVRC2012_validation_ground_truth.txt`` numbers
classes 1..1000 in its own order (``meta.mat``), the Caffe-style ``val.txt`` 0..999 in sorted
wnid order; the two cannot be told apart from the numbers and a wrong guess would mislabel
every image silently.

Standard library only: no torch, no solo-learn.
"""

from __future__ import annotations

import csv
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from mvssl_plugin.data.imagenet100_classes import IMAGENET100_CLASSES
from mvssl_plugin.errors import ConfigError

WNID = re.compile(r"^n\d{8}$")
IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")
#: ImageNet-1k: 732 to 1300 training images per class, 50 validation images per class
TRAIN_PER_CLASS = (732, 1300)
VAL_PER_CLASS = 50
LOC_SOLUTION = "LOC_val_solution.csv"
MANIFEST = "imagenet100.json"
#: what may sit beside train/ and val/ in an output folder (the memory format's default cache)
OUTPUT_EXTRAS = (MANIFEST, ".mvssl_cache")


@dataclass(frozen=True)
class Source:
    """Where the ImageNet-1k images are: train and val folders, and the label file of a flat val."""

    train: Path
    val: Path
    val_labels: Optional[Path] = None


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


def _listing(names: Iterable[str], limit: int = 5) -> str:
    names = [str(name) for name in names]
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_SUFFIXES) and not name.startswith(".")


def find_source(
    imagenet: Optional[Path] = None,
    train: Optional[Path] = None,
    val: Optional[Path] = None,
    val_labels: Optional[Path] = None,
) -> Source:
    """The train and val folders: ``train``/``val`` as given, else found under ``imagenet``
    (``train/``, ``val/`` or the Kaggle layout's ``ILSVRC/Data/CLS-LOC/{train,val}``)."""
    if imagenet is None and (train is None or val is None):
        raise ConfigError("say where ImageNet-1k is: --imagenet <root>, or --train <folder> and --val <folder>")
    if imagenet is not None:
        imagenet = Path(imagenet)
        if not imagenet.is_dir():
            raise ConfigError(f"--imagenet {imagenet}: no such folder")
        if train is None or val is None:
            layouts = [imagenet, imagenet / "ILSVRC" / "Data" / "CLS-LOC", imagenet / "Data" / "CLS-LOC"]
            found = next((base for base in layouts if (base / "train").is_dir() and (base / "val").is_dir()), None)
            if found is None:
                raise ConfigError(
                    f"--imagenet {imagenet}: found no train/ and val/ folders in it nor in its "
                    "ILSVRC/Data/CLS-LOC/ (the Kaggle layout): give --train and --val"
                )
            train = train or found / "train"
            val = val or found / "val"
    for flag, folder in (("--train", train), ("--val", val)):
        if not Path(folder).is_dir():
            raise ConfigError(f"{flag} {folder}: no such folder")
    if val_labels is not None and not Path(val_labels).is_file():
        raise ConfigError(f"--val-labels {val_labels}: no such file")
    return Source(Path(train), Path(val), Path(val_labels) if val_labels is not None else None)


def _images_in(folder: Path) -> List[str]:
    with os.scandir(folder) as entries:
        return sorted(os.path.abspath(e.path) for e in entries if is_image(e.name) and e.is_file())


def _class_folders(split: str, root: Path, classes: Sequence[str]) -> Dict[str, List[str]]:
    """class -> images of ``root/<wnid>/``; refuses a tree without the classes or with an empty one."""
    with os.scandir(root) as entries:
        present = {e.name for e in entries if e.is_dir() and WNID.match(e.name)}
    if not present:
        raise ConfigError(
            f"{split} folder {root} holds no class folder named by a WordNet id (like n01440764): "
            f"it is not an ImageNet-1k {split} folder"
        )
    missing = [wnid for wnid in classes if wnid not in present]
    if missing:
        raise ConfigError(
            f"{split} folder {root} lacks {len(missing)} of the {len(classes)} classes: {_listing(missing)} "
            f"(ImageNet-1k's {split} folder has every one: is this the whole tree?)"
        )
    found = {wnid: _images_in(root / wnid) for wnid in classes}
    empty = [wnid for wnid, files in found.items() if not files]
    if empty:
        raise ConfigError(
            f"{split} folder {root}: {len(empty)} class folder(s) hold no images (.JPEG, .jpg, .png): "
            f"{_listing(root / wnid for wnid in empty)}"
        )
    return found


def _check_label(label: str, where: str, known: set) -> str:
    if label.isdigit():
        raise ConfigError(
            f"{where}: numeric label {label!r}; give WordNet ids (n01440764): the devkit's 1..1000 "
            "and Caffe's 0..999 numberings differ and cannot be told apart"
        )
    if not WNID.match(label):
        raise ConfigError(f"{where}: label {label!r} is not a WordNet id (like n01440764)")
    if label not in known:
        raise ConfigError(f"{where}: label {label} is not a class of the train folder")
    return label


def read_val_labels(path: Path, images: Sequence[str], known: set) -> Dict[str, str]:
    """image path -> wnid for a flat validation folder's ``images``, from ``path`` (see the
    module docstring for the formats). Every image must be labelled and every label name an
    image; labels must be WordNet ids of the training classes (``known``)."""
    by_stem = {os.path.splitext(os.path.basename(p))[0]: p for p in images}
    by_name = {os.path.basename(p): p for p in images}
    labels: Dict[str, str] = {}
    unmatched: List[str] = []

    def place(key: str, label: str, *lookups: Dict[str, str]) -> None:
        """The label of the image ``key`` names (the first lookup that knows it), or ``key`` unmatched."""
        image = next((lookup[key] for lookup in lookups if key in lookup), None)
        if image is None:
            unmatched.append(key)
        else:
            labels[image] = label

    if path.suffix.lower() == ".csv":
        with open(path, newline="") as handle:
            rows = csv.reader(handle)
            header = next(rows, [])
            if header[:2] != ["ImageId", "PredictionString"]:
                raise ConfigError(f"{path}: expected the header ImageId,PredictionString (LOC_val_solution.csv)")
            for number, row in enumerate(rows, start=2):
                if not row:
                    continue
                words = row[1].split() if len(row) > 1 else []
                if not words:
                    raise ConfigError(f"{path}, line {number}: no class for {row[0]}")
                place(row[0], _check_label(words[0], f"{path}, line {number}", known), by_stem, by_name)
    else:
        with open(path) as handle:
            lines = [(n, line.split()) for n, line in enumerate(handle, start=1) if line.strip()]
        if lines and all(len(words) == 1 for _, words in lines):
            if len(lines) != len(images):
                raise ConfigError(
                    f"{path}: {len(lines)} labels (one per line, in file-name order) for the "
                    f"{len(images)} images of the validation folder"
                )
            for (number, (label,)), image in zip(lines, sorted(images, key=os.path.basename)):
                labels[image] = _check_label(label, f"{path}, line {number}", known)
        else:
            for number, words in lines:
                if len(words) != 2:
                    raise ConfigError(
                        f"{path}, line {number}: expected '<wnid>' or '<file name> <wnid>', found {' '.join(words)!r}"
                    )
                place(words[0], _check_label(words[1], f"{path}, line {number}", known), by_name, by_stem)
    if unmatched:
        raise ConfigError(
            f"{path} labels {len(unmatched)} image(s) the validation folder does not hold: {_listing(unmatched)} "
            "(is it the label file of this folder?)"
        )
    unlabelled = [os.path.basename(p) for p in images if p not in labels]
    if unlabelled:
        raise ConfigError(f"{path} does not label {len(unlabelled)} validation image(s): {_listing(unlabelled)}")
    return labels


def _label_file(source: Source, imagenet: Optional[Path]) -> Path:
    if source.val_labels is not None:
        return source.val_labels
    places = [source.val.parent, *source.val.parents]
    if imagenet is not None:
        places.insert(0, Path(imagenet))
    for place in places[:6]:
        if (place / LOC_SOLUTION).is_file():
            return place / LOC_SOLUTION
    raise ConfigError(
        f"validation folder {source.val} holds images but no class folders: give its labels with "
        f"--val-labels ({LOC_SOLUTION}, or a text file of WordNet ids, one per image in file-name order)"
    )


def plan_subset(
    source: Source, classes: Sequence[str] = IMAGENET100_CLASSES, imagenet: Optional[Path] = None
) -> Subset:
    """The images of ``classes`` in ``source``, checked: every class present with at least
    one image in train and in val; a flat val labelled by its label file."""
    classes = tuple(classes)
    if len(set(classes)) != len(classes) or not all(WNID.match(c) for c in classes):
        raise ConfigError("the class list must be distinct WordNet ids")
    train = _class_folders("train", source.train, classes)
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
        val = _class_folders("val", source.val, classes)
        layout = "class folders"
    elif loose:
        labels_path = _label_file(source, imagenet)
        labels = read_val_labels(labels_path, loose, known)
        val = {wnid: [] for wnid in classes}
        for image in loose:
            if labels[image] in val:
                val[labels[image]].append(image)
        empty = [wnid for wnid, files in val.items() if not files]
        if empty:
            raise ConfigError(
                f"{labels_path} gives no validation image to {len(empty)} of the {len(classes)} classes: "
                f"{_listing(empty)}"
            )
        layout = labels_path.name
        source = Source(source.train, source.val, labels_path)
    else:
        raise ConfigError(f"validation folder {source.val} holds neither class folders nor images")
    subset = Subset(classes, {"train": train, "val": val}, source, layout)
    clashes = _duplicate_names(subset)
    if clashes:
        raise ConfigError(f"two images of one class share a file name: {_listing(clashes)}")
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
            f"--out {out} holds other things ({_listing(others)}): give a new or empty folder; nothing was changed"
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
