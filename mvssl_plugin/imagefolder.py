"""ImageFolder trees on disk (one sub-folder of images per class), standard library only.

The config checks and every data format ask the same questions of a data path; the
answers live here, below both, so that neither imports the other.
"""

from __future__ import annotations

import os
from typing import List, Optional

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def is_image_file(name: str) -> bool:
    return name.lower().endswith(IMAGE_EXTENSIONS)


def images_under(folder: str | os.PathLike) -> List[str]:
    """Image files in ``folder`` and its sub-folders (torchvision's ImageFolder reads
    nested folders too), sorted."""
    found = []
    for parent, _, names in os.walk(folder, followlinks=True):
        found += [os.path.join(parent, n) for n in names if is_image_file(n)]
    return sorted(found)


def class_folders(path: str | os.PathLike) -> List[os.DirEntry]:
    """Every sub-folder, hidden ones included: torchvision's ImageFolder makes each a class."""
    return sorted((e for e in os.scandir(path) if e.is_dir()), key=lambda e: e.name)


def _has_image(folder: str) -> bool:
    for _, _, names in os.walk(folder, followlinks=True):
        if any(is_image_file(n) for n in names):
            return True
    return False


def is_image_folder_tree(path: Optional[str | os.PathLike]) -> bool:
    """True when ``path`` has at least one class sub-folder holding an image (at any depth)."""
    if path is None or not os.path.isdir(path):
        return False
    return any(_has_image(entry.path) for entry in class_folders(path))


def empty_class_folders(path: str | os.PathLike) -> List[str]:
    """Class sub-folders without a single image file, at any depth (torchvision's rule)."""
    return [entry.name for entry in class_folders(path) if not _has_image(entry.path)]


def nested_class_folders(path: str | os.PathLike) -> List[str]:
    """Class folders whose images sit (partly) in sub-folders: read, but worth a notice."""
    nested = []
    for entry in class_folders(path):
        if any(child.is_dir() and _has_image(child.path) for child in os.scandir(entry.path)):
            nested.append(entry.name)
    return nested
