"""The dataset name and data format handed to solo-learn's builders.

solo-learn reads CIFAR and STL-10 only through torchvision's downloader. Here the same
datasets may also be ImageFolder trees (one sub-folder per class), detected from the
path: each dataset keeps its own normalization and the recipes their crop sizes, so a
JPEG copy such as ../shared/data/cifar10 trains exactly like the torchvision copy.
"""

from __future__ import annotations

import os
from typing import Optional

from mvssl_plugin.data.formats import FORMATS
from mvssl_plugin.data.imagefolder import is_image_folder_tree
from mvssl_plugin.data.key_checks import TORCHVISION_DATASETS


def solo_dataset_name(dataset: str, path: Optional[str | os.PathLike]) -> str:
    """The name to hand solo-learn's dataset builders: ``custom`` for ImageFolder trees
    of datasets it would otherwise download (its ``custom`` path is a plain ImageFolder)."""
    if dataset in TORCHVISION_DATASETS and is_image_folder_tree(path):
        return "custom"
    return dataset


def solo_data_format(data_format: str) -> str:
    """The format to hand solo-learn: DALI and the in-memory format read ImageFolder
    trees, so their files are listed as solo-learn lists an ``image_folder`` (solo-learn's
    own DALI path is ImageNet-only)."""
    return FORMATS[data_format].solo_name if data_format in FORMATS else data_format
