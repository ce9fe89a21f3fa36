"""Reading an ImageNet-1k tree: where its train and val folders are, the class folders in them,
and the label file of a flat validation folder.

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
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

from mvssl_plugin.errors import ConfigError

WNID = re.compile(r"^n\d{8}$")
IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")
LOC_SOLUTION = "LOC_val_solution.csv"


@dataclass(frozen=True)
class Source:
    """Where the ImageNet-1k images are: train and val folders, and the label file of a flat val."""

    train: Path
    val: Path
    val_labels: Optional[Path] = None


def listing(names: Iterable[str], limit: int = 5) -> str:
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


def images_in(folder: Path) -> List[str]:
    with os.scandir(folder) as entries:
        return sorted(os.path.abspath(e.path) for e in entries if is_image(e.name) and e.is_file())


def class_folders(split: str, root: Path, classes: Sequence[str]) -> Dict[str, List[str]]:
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
            f"{split} folder {root} lacks {len(missing)} of the {len(classes)} classes: {listing(missing)} "
            f"(ImageNet-1k's {split} folder has every one: is this the whole tree?)"
        )
    found = {wnid: images_in(root / wnid) for wnid in classes}
    empty = [wnid for wnid, files in found.items() if not files]
    if empty:
        raise ConfigError(
            f"{split} folder {root}: {len(empty)} class folder(s) hold no images (.JPEG, .jpg, .png): "
            f"{listing(root / wnid for wnid in empty)}"
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
            f"{path} labels {len(unmatched)} image(s) the validation folder does not hold: {listing(unmatched)} "
            "(is it the label file of this folder?)"
        )
    unlabelled = [os.path.basename(p) for p in images if p not in labels]
    if unlabelled:
        raise ConfigError(f"{path} does not label {len(unlabelled)} validation image(s): {listing(unlabelled)}")
    return labels


def label_file(source: Source, imagenet: Optional[Path]) -> Path:
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
