"""The files a built dataset reads: listed with their labels, restricted to a subset, and
screened (bad files dropped or named, every file decoded by the one decode all formats share).
Works on solo-learn's and torchvision's dataset objects alike."""

from __future__ import annotations

import os
from typing import Callable, List, Optional

from torch.utils.data import Dataset

from mvssl_plugin.data.pixels import load_rgb
from mvssl_plugin.data.scan import CheckedLoader

#: ``screen(key, files)``: the usable files among a data path's files (see
#: :func:`mvssl_plugin.data.scan.screen_files`); raises DataError for bad ones
Screen = Callable[[str, List[str]], List[str]]


def dataset_files(dataset) -> Optional[List[str]]:
    """The image files a dataset reads (ImageFolder: ``samples``; solo-learn's unlabelled
    folder: ``images``); None for datasets read from archives (torchvision's CIFAR/STL)."""
    if hasattr(dataset, "samples"):
        return [path for path, _ in dataset.samples]
    if hasattr(dataset, "images") and hasattr(dataset, "root"):
        return [os.path.join(dataset.root, name) for name in dataset.images]
    return None


def dataset_labels(dataset) -> Optional[List[int]]:
    """Labels in :func:`dataset_files` order, read from ImageFolder's ``samples``: solo-learn's
    ``data_fraction`` subsets ``samples`` but leaves ``targets`` whole. None without samples."""
    if hasattr(dataset, "samples"):
        return [int(label) for _, label in dataset.samples]
    return None


def keep_files(dataset, files: List[str]) -> None:
    """Restricts a dataset of :func:`dataset_files` to ``files`` (kept in its order)."""
    keep = set(files)
    if hasattr(dataset, "samples"):
        dataset.samples = [s for s in dataset.samples if s[0] in keep]
        dataset.imgs = dataset.samples
        dataset.targets = [label for _, label in dataset.samples]
    else:
        dataset.images = [name for name in dataset.images if os.path.join(dataset.root, name) in keep]


class UnlabelledFolder(Dataset):
    """solo-learn's unlabelled pretraining folder (``dataset_with_index(CustomDatasetWithoutLabels)``:
    ``root``, ``images``, ``transform``; items ``(index, image, -1)``), reading through
    :data:`loader` where solo-learn's opens files itself with PIL's ``convert("RGB")``.
    :func:`screened` gives such a dataset this class."""

    loader = CheckedLoader(load_rgb)

    def __getitem__(self, index: int):
        x = self.loader(os.path.join(self.root, self.images[index]))
        return index, (self.transform(x) if self.transform is not None else x), -1

    def __len__(self) -> int:
        return len(self.images)


def _solo_unlabelled(dataset) -> bool:
    # local: solo-learn (all of it, with timm and Lightning: seconds) loads when a dataset is screened;
    # importing this module (every data format's loaders do) loads none of it
    from solo.data.pretrain_dataloader import CustomDatasetWithoutLabels

    return isinstance(dataset, CustomDatasetWithoutLabels) and type(dataset).__name__ == "DatasetWithIndex"


def screened(dataset, key: str, screen: Optional[Screen]):
    """``dataset`` with only the files ``screen`` keeps, read by the decode every format
    shares (:func:`mvssl_plugin.data.pixels.load_rgb`: 16-bit and float images scaled, not
    clipped), its reads naming the file they fail on."""
    if hasattr(dataset, "loader"):
        if not isinstance(dataset.loader, CheckedLoader):
            dataset.loader = CheckedLoader(load_rgb)
    elif _solo_unlabelled(dataset):
        dataset.__class__ = UnlabelledFolder
    files = dataset_files(dataset) if screen is not None else None
    if files is not None:
        kept = screen(key, files)
        if len(kept) != len(files):
            keep_files(dataset, kept)
    return dataset
