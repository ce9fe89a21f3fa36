"""The data keys of a config, checked before anything is built: dataset, format, paths,
fraction, and the DALI / in-memory options. Here rather than in ``config/`` because the
path checks read ImageFolder trees (:mod:`mvssl_plugin.data.imagefolder`)."""

from __future__ import annotations

import importlib.util
import os

from omegaconf import DictConfig

from mvssl_plugin.config.values import AUTO, boolean, count, is_int, is_number, require, select
from mvssl_plugin.data.formats import data_format
from mvssl_plugin.data.imagefolder import (
    class_names,
    empty_class_folders,
    is_image_folder_tree,
    match_classes,
    nested_class_folders,
)
from mvssl_plugin.data.resolution import full_side
from mvssl_plugin.errors import ConfigError

SUPPORTED_DATASETS = ("cifar10", "cifar100", "stl10", "imagenet", "imagenet100", "custom")
SMALL_IMAGE_DATASETS = ("cifar10", "cifar100")
TORCHVISION_DATASETS = ("cifar10", "cifar100", "stl10")
DALI_DEVICES = (AUTO, "cpu", "gpu")


def torchvision_archive_present(dataset: str, path: str) -> bool:
    """True when ``path`` holds the files torchvision's CIFAR/STL-10 classes read."""
    folder = {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python", "stl10": "stl10_binary"}[dataset]
    return os.path.isdir(os.path.join(path, folder))


def _check_class_folders(key: str, path: str) -> None:
    empty = empty_class_folders(path)
    if empty:
        raise ConfigError(
            f"{key}={path!r}: class folder(s) {empty[:5]} hold no images: remove them or add images "
            "(every sub-folder is a class)"
        )


def check_data_path(cfg: DictConfig, key: str) -> None:
    """``key`` (data.train_path / data.val_path) points at data the format can read."""
    path = select(cfg, key)
    dataset = cfg.data.dataset
    fmt = data_format(cfg)
    if dataset in TORCHVISION_DATASETS and fmt.reads_folders:
        if path is not None and is_image_folder_tree(path):
            return _check_class_folders(key, path)
        if fmt.reads_archives:
            if path is not None and torchvision_archive_present(dataset, path):
                return
            if select(cfg, "data.download", False):
                return
        elif path is not None and torchvision_archive_present(dataset, path):
            raise ConfigError(
                f"{key}={path!r} holds torchvision's {dataset} archive, which data.format={fmt.name} "
                "cannot read: give an ImageFolder tree (one sub-folder of images per class), "
                "or use data.format=image_folder"
            )
        if path is None or not os.path.exists(str(path)):
            raise ConfigError(
                f"{key}={path!r} does not exist: point it at an ImageFolder tree of {dataset} "
                f"(one sub-folder of images per class) or set data.download=true to fetch {dataset} there"
            )
        raise ConfigError(
            f"{key}={path!r} holds neither an ImageFolder tree (one sub-folder of images per class) "
            f"nor torchvision's {dataset} files: point it at an ImageFolder tree "
            f"or set data.download=true to fetch {dataset} there"
        )
    if path is None or not os.path.exists(str(path)):
        raise ConfigError(f"{key}={path!r} does not exist: point it at your {dataset} data")
    if fmt.reads_folders and not select(cfg, "data.no_labels", False):
        if not is_image_folder_tree(path):
            raise ConfigError(f"{key}={path!r} is not an ImageFolder tree (one sub-folder of images per class)")
        _check_class_folders(key, path)


def check_dali(cfg: DictConfig) -> None:
    """DALI is installed, ``dali.device`` can run here (``auto`` resolved), threads valid."""
    import torch  # local: torch (~3 s) for a DALI run's device only; the data checks import no torch

    if importlib.util.find_spec("nvidia") is None or importlib.util.find_spec("nvidia.dali") is None:
        raise ConfigError(
            "data.format=dali needs NVIDIA DALI, which is not installed: "
            "pip install nvidia-dali-cuda120 (or use data.format=image_folder or memory)"
        )
    cfg.dali = select(cfg, "dali", {}) or {}
    device = select(cfg, "dali.device", AUTO)
    if device not in DALI_DEVICES:
        raise ConfigError(f"dali.device={device!r}: choose one of {DALI_DEVICES}")
    if device == AUTO:
        device = "gpu" if select(cfg, "accelerator") in ("gpu", "cuda") and torch.cuda.is_available() else "cpu"
    elif device == "gpu" and not torch.cuda.is_available():
        raise ConfigError("dali.device=gpu needs a CUDA GPU, and none is visible: set dali.device=cpu")
    cfg.dali.device = device
    require(cfg, "dali.num_threads", count, "must be an integer >= 1 (or null for data.num_workers)")


def check_inmemory_options(cfg: DictConfig) -> None:
    """``memory.size`` (an integer side, or null to keep the images' own size), the cache
    folder, and the resolution ramp (:func:`check_resolution`)."""
    require(cfg, "memory.size", count, "must be an integer >= 1 (pixels per side), or null for the images' size")
    cache = select(cfg, "memory.cache_dir")
    if cache is not None and not isinstance(cache, str):
        raise ConfigError(f"memory.cache_dir={cache!r}: give a folder path, or null for the default")
    check_resolution(cfg)


def check_resolution(cfg: DictConfig) -> None:
    """``memory.resolution``: ``start`` a side in pixels up to the largest pipeline's
    ``crop_size``; ``ramp_start`` < ``ramp_end``, fractions of the run's epochs; ``multiple``
    an integer >= 1; ``strength_start`` a fraction in [0, 1]
    (:class:`mvssl_plugin.data.resolution.ResolutionRamp`)."""
    if select(cfg, "memory.resolution") is None:
        return
    start = select(cfg, "memory.resolution.start")
    full = full_side(cfg.augmentations)
    if not count(start) or start > full:
        raise ConfigError(
            f"memory.resolution.start={start!r}: give the first epochs' side in pixels, an integer from 1 to "
            f"the largest crop_size ({full}); remove memory.resolution to train at {full} px throughout"
        )
    ramp = [select(cfg, f"memory.resolution.{k}", d) for k, d in (("ramp_start", 0.0), ("ramp_end", 0.75))]
    if not all(is_number(v) for v in ramp) or not 0 <= ramp[0] < ramp[1] <= 1:
        raise ConfigError(
            f"memory.resolution.ramp_start={ramp[0]!r}, ramp_end={ramp[1]!r}: fractions of the run's epochs "
            "with 0 <= ramp_start < ramp_end <= 1 (the side grows from start to the full size between them)"
        )
    require(cfg, "memory.resolution.multiple", count, "must be an integer >= 1 (sides are multiples of it)")
    strength = select(cfg, "memory.resolution.strength_start", 1.0)
    if not is_number(strength) or not 0 <= strength <= 1:
        raise ConfigError(
            f"memory.resolution.strength_start={strength!r}: the augmentation's magnitude at the start side, a "
            "fraction from 0 to 1 of the recipe's (1, the default, keeps the recipe's throughout)"
        )


def check_data(cfg: DictConfig) -> None:
    """Dataset, format, fraction and paths; the format's own options."""
    dataset = select(cfg, "data.dataset")
    if dataset not in SUPPORTED_DATASETS:
        raise ConfigError(f"data.dataset={dataset!r}: choose one of {SUPPORTED_DATASETS}")
    fmt = data_format(cfg)
    cfg.data.format = fmt.name
    for key in ("data.fraction", "data.val_fraction"):
        fraction = select(cfg, key, -1)
        if not is_number(fraction) or not (fraction == -1 or 0 < fraction < 1):
            raise ConfigError(f"{key}={fraction!r}: use -1 for all images or a number in (0, 1)")
    holdout = select(cfg, "data.holdout", 0)
    if not is_int(holdout) or holdout < 0:
        raise ConfigError(
            f"data.holdout={holdout!r}: the number of training images held out as a validation split "
            "(an integer, e.g. 5000), or 0 for none"
        )
    if holdout and (select(cfg, "data.no_labels", False) or not is_image_folder_tree(cfg.data.train_path)):
        raise ConfigError(
            f"data.holdout={holdout}: the validation split needs a labelled ImageFolder tree (one folder per "
            "class) in data.train_path; set data.holdout=0"
        )
    if select(cfg, "epoch_knn.enabled", False) and not is_image_folder_tree(cfg.data.train_path):
        raise ConfigError(
            "epoch_knn.enabled=true reads the training images as an ImageFolder tree (one folder per class) in "
            "data.train_path; point it at one, or set epoch_knn.enabled=false"
        )
    require(cfg, "data.skip_bad_files", boolean, "use true (train without unusable image files) or false")
    check_data_path(cfg, "data.train_path")
    if select(cfg, "data.val_path") is not None:
        check_data_path(cfg, "data.val_path")
    fmt.check_options(cfg)
    if not fmt.decoded_once and select(cfg, "memory.resolution") is not None:
        raise ConfigError(
            f"memory.resolution is set, but data.format={cfg.data.format}: only the in-memory format cuts "
            "views at a size that changes per epoch; use data.format=memory, or remove memory.resolution"
        )


def nested_folder_notices(cfg: DictConfig) -> list[str]:
    """One line per data path whose class folders hold images in sub-folders: torchvision's
    ImageFolder reads them as part of the class, which is worth saying (a misplaced tree,
    e.g. train/train/<class>, would otherwise train on one class)."""
    notices = []
    for key in ("data.train_path", "data.val_path"):
        path = select(cfg, key)
        if path is None or not is_image_folder_tree(path):
            continue
        nested = nested_class_folders(path)
        if nested:
            shown = ", ".join(nested[:5]) + (f" and {len(nested) - 5} more" if len(nested) > 5 else "")
            notices.append(
                f"{key}: class folder(s) {shown} hold images in sub-folders; they are read as part of the class"
            )
    return notices


def class_match_notices(cfg: DictConfig) -> list[str]:
    """Validation classes are matched to the training classes by folder name (the datasets
    are relabelled so in :func:`mvssl_plugin.data.label_matching.label_by_name`); checked here on the
    folder names alone, before anything is built: names the training tree lacks stop the run
    (ConfigError), a subset of the training classes is said once."""
    train, val = select(cfg, "data.train_path"), select(cfg, "data.val_path")
    if val is None or (cfg.data.dataset == "custom" and select(cfg, "data.no_labels", False)):
        return []
    if not data_format(cfg).reads_folders or not (is_image_folder_tree(train) and is_image_folder_tree(val)):
        return []
    _, notice = match_classes(class_names(train), class_names(val))
    return [notice] if notice else []


def apply_backbone_defaults(cfg: DictConfig, plugin_backbones: tuple[str, ...]) -> None:
    """Gives the plugin's backbones solo-learn's small-image stem on CIFAR unless set."""
    name = select(cfg, "backbone.name")
    if name in plugin_backbones:
        cfg.backbone.kwargs = select(cfg, "backbone.kwargs", {}) or {}
        if select(cfg, "backbone.kwargs.small_input") is None:
            cfg.backbone.kwargs.small_input = cfg.data.dataset in SMALL_IMAGE_DATASETS
