"""The data formats, one row each (``data.format``): what a format reads, what solo-learn is told,
where its views are cut, which functions build its loaders and check its own keys.

Every question the rest of the package asks about a format is an attribute here, not a comparison
of its name; adding a format is a row and the functions it names (docs/architecture.md, "Adding a
data format"). The loaders are named as ``"module:function"`` and imported when a loader is built,
so reading the table (the config checks do) loads neither DALI nor the in-memory pipeline.
(``config/hardware.py`` sits below ``data/`` and asks ``data.format != "memory"`` itself.)"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from omegaconf import DictConfig

from mvssl_plugin.config.values import select
from mvssl_plugin.errors import ConfigError


def _resolve(path: str) -> Callable[..., Any]:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class DataFormat:
    """One value of ``data.format``."""

    name: str
    #: the training and validation paths are ImageFolder trees read file by file
    reads_folders: bool
    #: torchvision's CIFAR / STL-10 archives (``data.download``) will do too
    reads_archives: bool
    #: the format solo-learn's parser and dataset code are told (its own DALI path is ImageNet-only)
    solo_name: str
    #: views cut by torchvision transforms in loader workers (``data.num_workers``), file by file
    torchvision_views: bool
    #: decoded once into a uint8 cache on disk (``memory.cache_dir``), views cut on the training device
    decoded_once: bool
    #: ``"module:function"``: ``(cfg, screen) -> (loader, number of images)`` for pretraining
    pretrain_loader: str
    #: ``"module:function"``: ``(cfg, val_set) -> loader or None``; None: solo-learn's torchvision loader
    val_loader: Optional[str] = None
    #: ``"module:function"``: ``(cfg) -> None``, the checks of the format's own keys
    options: Optional[str] = None
    #: where the start block says the views are cut
    where: Callable[[DictConfig], str] = lambda cfg: ""

    def build_pretrain_loader(self, cfg: DictConfig, screen: Any = None) -> Any:
        return _resolve(self.pretrain_loader)(cfg, screen)

    def build_val_loader(self, cfg: DictConfig, val_set: Any) -> Optional[Any]:
        return _resolve(self.val_loader)(cfg, val_set) if self.val_loader else None

    def check_options(self, cfg: DictConfig) -> None:
        if self.options:
            _resolve(self.options)(cfg)


FORMATS: Dict[str, DataFormat] = {
    f.name: f
    for f in (
        DataFormat(
            name="image_folder",
            reads_folders=True,
            reads_archives=True,
            solo_name="image_folder",
            torchvision_views=True,
            decoded_once=False,
            pretrain_loader="mvssl_plugin.data.loaders:torchvision_pretrain_loader",
        ),
        DataFormat(
            name="h5",
            reads_folders=False,
            reads_archives=False,
            solo_name="h5",
            torchvision_views=True,
            decoded_once=False,
            pretrain_loader="mvssl_plugin.data.loaders:torchvision_pretrain_loader",
        ),
        DataFormat(
            name="dali",
            reads_folders=True,
            reads_archives=False,
            solo_name="image_folder",
            torchvision_views=False,
            decoded_once=False,
            pretrain_loader="mvssl_plugin.data.loaders:dali_pretrain_loader",
            options="mvssl_plugin.data.key_checks:check_dali",
            where=lambda cfg: f" on the {select(cfg, 'dali.device', 'cpu')}",
        ),
        DataFormat(
            name="memory",
            reads_folders=True,
            reads_archives=False,
            solo_name="image_folder",
            torchvision_views=False,
            decoded_once=True,
            pretrain_loader="mvssl_plugin.data.loaders:memory_pretrain_loader",
            val_loader="mvssl_plugin.data.inmemory.eval_loaders:val_memory_loader",
            options="mvssl_plugin.data.key_checks:check_inmemory_options",
            where=lambda cfg: f" on the {cfg.accelerator}",
        ),
    )
}


def data_format(value: Any) -> DataFormat:
    """The row of ``value``: a config (its ``data.format``, default ``image_folder``) or a name.

    Raises:
        ConfigError: a name with no row, naming those there are.
    """
    name = select(value, "data.format", "image_folder") if isinstance(value, DictConfig) else value
    if name not in FORMATS:
        raise ConfigError(f"data.format={name!r}: choose one of {tuple(FORMATS)}")
    return FORMATS[name]
