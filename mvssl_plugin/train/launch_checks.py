"""The checks an entry point runs on a composed config, in order, before building anything.

Each concern's checks live with it (``config/`` for keys, each method's
``add_and_assert_specific_cfg`` for its own); this module only puts them in order and
adds what needs several of them at once (method + views, linear checkpoint + data).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Callable, Dict, List, Tuple, Type

from omegaconf import DictConfig

from mvssl_plugin.config import (
    SOLO_BETA_SLOTS,
    check_augmentations,
    check_signals,
    check_training_keys,
    resolve_beta,
    select,
    set_crop_counts,
    views_of,
    views_to_crops,
)
from mvssl_plugin.config.keys import check_keys
from mvssl_plugin.data.dataset_files import Screen
from mvssl_plugin.data.formats import data_format
from mvssl_plugin.data.inmemory.cache import default_cache_dir
from mvssl_plugin.data.inmemory.eval_loaders import probe_recipes
from mvssl_plugin.data.key_checks import check_data, class_match_notices, nested_folder_notices
from mvssl_plugin.data.scan import screen_files
from mvssl_plugin.data.transforms import eval_keeps_size
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.files import check_writable_folder
from mvssl_plugin.methods.barlow_vicreg import BarlowVICRegMethod
from mvssl_plugin.registry import PLUGIN_METHODS, is_multiview
from mvssl_plugin.train.peak_ram_check import check_peak_ram
from mvssl_plugin.train.resume import resolve_checkpoint


def check_method_and_backbone(cfg: DictConfig, methods: Dict[str, Type], backbones: Dict) -> None:
    method = select(cfg, "method")
    if method not in methods:
        raise ConfigError(f"method={method!r} is not registered: choose one of {sorted(methods)}")
    backbone = select(cfg, "backbone.name")
    if backbone not in backbones:
        raise ConfigError(f"backbone.name={backbone!r} is unknown: choose one of {sorted(backbones)}")


def check_builtin_method(cfg: DictConfig) -> List[str]:
    """solo-learn's own methods train on 2 large views; the plugin's keys are left out of
    their config (and so of args.json). Returns notices."""
    large = views_of(cfg).large
    if large != 2:
        raise ConfigError(
            f"method={cfg.method} is solo-learn's two-view method and the recipe gives {large} large views: "
            f"set data.num_views=2 (or use one of the multi-view methods {sorted(PLUGIN_METHODS)} for {large} views)"
        )
    kwargs = select(cfg, "method_kwargs") or {}
    dropped = [key for key in BarlowVICRegMethod.SHARED_DEFAULTS if key in kwargs]
    for key in dropped:
        del cfg.method_kwargs[key]
    slot = SOLO_BETA_SLOTS.get(cfg.method)
    if slot is not None:
        resolve_beta(cfg, slot)
    if dropped:
        return [f"method={cfg.method} does not read method_kwargs {dropped}: left out of its config"]
    return []


@contextlib.contextmanager
def telling(warnings: List[str]) -> Iterator[None]:
    """Adds ``warnings`` (unknown keys) to a ConfigError raised inside: a misspelt key often
    explains the error that follows, and notices are printed only once all checks pass."""
    try:
        yield
    except ConfigError as err:
        if not warnings:
            raise
        raise ConfigError("; ".join([str(err), *warnings])) from None


def check_output_folders(cfg: DictConfig) -> None:
    """Every folder the run will write, checked writable before any data is read: the
    checkpoint folder, wandb's (``./wandb`` of the working folder: solo-learn's logger gives it
    no other), the in-memory format's decode cache, and for the fast probe the run folder its
    ``probe.json`` goes into. A run that cannot write stops here, not after its first epoch."""
    if select(cfg, "checkpoint.enabled", False) and select(cfg, "probe") is None:
        folder = select(cfg, "checkpoint.dir")
        check_writable_folder(folder, f"checkpoint.dir={folder}")
    if select(cfg, "wandb.enabled", False):
        check_writable_folder(
            Path.cwd() / "wandb", "wandb.enabled=true (its files go to ./wandb/ of the working folder)"
        )
    if data_format(cfg).decoded_once:
        cache = select(cfg, "memory.cache_dir")
        folder = cache if cache is not None else default_cache_dir(cfg.data.train_path)
        check_writable_folder(
            folder, f"memory.cache_dir={cache if cache is not None else f'null (the default, {folder})'}"
        )
    ckpt = select(cfg, "pretrained_feature_extractor")
    if select(cfg, "probe") is not None and ckpt is not None:
        check_writable_folder(
            Path(str(ckpt)).parent, f"pretrained_feature_extractor={ckpt} (probe.json goes beside it)"
        )


def check_pretrain_cfg(
    cfg: DictConfig, methods: Dict[str, Type], backbones: Dict, optimizers: Tuple[str, ...]
) -> List[str]:
    """Validates a pretraining config in place, fills defaults, resolves beta; returns notices."""
    check_method_and_backbone(cfg, methods, backbones)
    key_warnings = check_keys(cfg, "pretrain", methods[cfg.method], plugin_method=is_multiview(cfg.method))
    with telling(key_warnings):
        check_data(cfg)
        check_output_folders(cfg)
        notices = key_warnings + nested_folder_notices(cfg) + class_match_notices(cfg)
        views_to_crops(cfg)
        check_augmentations(cfg)
        set_crop_counts(cfg)
        check_training_keys(cfg, optimizers)
        notices += check_signals(cfg)
        if is_multiview(cfg.method):
            methods[cfg.method].add_and_assert_specific_cfg(cfg)
        else:
            notices += check_builtin_method(cfg)
        notices += check_peak_ram(cfg)
    return notices


def check_linear_cfg(cfg: DictConfig, backbones: Dict, optimizers: Tuple[str, ...]) -> List[str]:
    """Validates a linear-evaluation config in place; returns notices."""
    backbone = select(cfg, "backbone.name")
    if backbone not in backbones:
        raise ConfigError(f"backbone.name={backbone!r} is unknown: choose one of {sorted(backbones)}")
    key_warnings = check_keys(cfg, "linear")
    with telling(key_warnings):
        notices = key_warnings + resolve_checkpoint(cfg)
        check_data(cfg)
        check_output_folders(cfg)
        notices += nested_folder_notices(cfg) + class_match_notices(cfg)
        if select(cfg, "data.val_path") is None:
            raise ConfigError("data.val_path is missing: linear evaluation needs a validation set")
        check_training_keys(cfg, optimizers)
        notices += check_eval_format(cfg)
    return notices


def check_eval_format(cfg: DictConfig) -> List[str]:
    """Which pipeline reads a linear evaluation's images: the fast probe reads with
    ``memory`` (CIFAR and STL-10 sizes only, checked here) or torchvision; solo-learn's
    full linear evaluation always reads with torchvision, which a notice says."""
    fmt = data_format(cfg)
    if fmt.decoded_once and select(cfg, "probe") is not None:
        probe_recipes(str(select(cfg, "data.dataset")))
        return []
    if not fmt.torchvision_views:
        what = "the fast probe" if select(cfg, "probe") is not None else "solo-learn's linear evaluation"
        serves = "pretraining and the fast probe" if fmt.decoded_once else "pretraining"
        return [f"data.format={fmt.name}: {what} reads its images with torchvision; {fmt.name} serves {serves}"]
    return []


def file_screen(cfg: DictConfig, notify: Callable[[str], None] = print, pretraining: bool = True) -> Screen:
    """The check every data path's image files get before training (a header scan, see
    :mod:`mvssl_plugin.data.scan`): bad files stop the run with their names (DataError,
    exit 4), or with ``data.skip_bad_files: true`` are left out with a printed count.

    Sizes are checked where a batch needs them: validation images of datasets whose
    transform does not resize (CIFAR) must share one size; with ``rrc.enabled: false``
    the torchvision pretraining pipeline only resizes the shorter side, so training
    images must share one aspect ratio. A data path's answer is kept, so the fast probe's
    two views of one set are scanned once.
    """
    skip = bool(select(cfg, "data.skip_bad_files", False))
    rrc_off = any(not select(aug, "rrc.enabled", True) for aug in (select(cfg, "augmentations") or []))
    fmt = data_format(cfg)
    same_aspect = pretraining and rrc_off and fmt.torchvision_views and fmt.reads_folders
    same_size = eval_keeps_size(str(select(cfg, "data.dataset")))
    answers: Dict[Tuple[str, Tuple[str, ...]], List[str]] = {}

    def screen(key: str, files: List[str]) -> List[str]:
        seen = (key, tuple(files))
        if seen not in answers:
            answers[seen] = screen_files(
                files,
                key,
                skip,
                notify=lambda text: notify(f"mvssl: {text}"),
                same_size=same_size and key == "data.val_path",
                same_aspect=same_aspect and key == "data.train_path",
            )
        return answers[seen]

    return screen
