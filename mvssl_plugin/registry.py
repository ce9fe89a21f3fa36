"""The one place where the plugin's names map to implementations.

To add a method: write its class in ``methods/`` (its defaults, rules and beta slot live
there) and add one line to :data:`PLUGIN_METHODS`. ``register()`` adds the plugin's entries to
solo-learn's own tables (``solo.methods.METHODS`` and ``BaseMethod._BACKBONES``), so
anything in solo-learn that looks a name up, its linear evaluation and auto-resumer
included, finds them. Entries are import paths, so reading this module imports nothing
heavy.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, Optional, Type

from mvssl_plugin.config.beta import SOLO_BETA_SLOTS, BetaSlot

#: the plugin's methods (solo-learn's own table is ``solo.methods.METHODS``)
PLUGIN_METHODS: Dict[str, str] = {
    "mabt": "mvssl_plugin.methods.mabt:MultiAugBarlowTwins",
    "mavicreg": "mvssl_plugin.methods.mavicreg:MultiAugVICReg",
    "mmcr": "mvssl_plugin.methods.mmcr:MultiViewMMCR",
}
PLUGIN_BACKBONES: Dict[str, str] = {
    "narrow_resnet18": "mvssl_plugin.backbones.narrow_resnet:narrow_resnet18",
}

SOLO_COMMIT = "9187ea39c2c3f43c455ab06664d2b019a9802954"
SOLO_INSTALL_HINT = (
    "mvssl-plugin needs solo-learn 1.0.6 from its repository (PyPI's 1.0.2 is too old): "
    "bash scripts/install.sh, or pip install 'setuptools<70' wheel && pip install --no-build-isolation "
    f"'git+https://github.com/vturrisi/solo-learn@{SOLO_COMMIT}'"
)


def load(path: str) -> Any:
    """The object an ``module:attribute`` path names."""
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


def plugin_methods() -> Dict[str, Type]:
    return {name: load(path) for name, path in PLUGIN_METHODS.items()}


def plugin_backbones() -> Dict[str, Callable]:
    return {name: load(path) for name, path in PLUGIN_BACKBONES.items()}


def is_multiview(method: Optional[str]) -> bool:
    return method in PLUGIN_METHODS


def method_class(method: Optional[str]) -> Optional[Type]:
    """The plugin's class for ``method``; None for solo-learn's own methods."""
    return load(PLUGIN_METHODS[method]) if method in PLUGIN_METHODS else None


def beta_slot(method: Optional[str]) -> Optional[BetaSlot]:
    """Where ``method`` keeps its orthogonality weight (a plugin method's class says, solo-learn's
    are in :data:`~mvssl_plugin.config.beta.SOLO_BETA_SLOTS`); None for methods without one."""
    if method in PLUGIN_METHODS:
        return method_class(method).BETA_SLOT
    return SOLO_BETA_SLOTS.get(method)


def register() -> Dict[str, Type]:
    """Registers the plugin into solo-learn (idempotent); returns solo-learn's METHODS.

    Raises:
        RuntimeError: if another implementation already holds one of the names.
    """
    try:
        # by name, not attribute: the autoregister hook calls this while solo.methods is
        # loaded but not yet an attribute of the solo package
        solo_methods = importlib.import_module("solo.methods")
        from solo.methods.base import BaseMethod  # local: solo-learn loads in register(), not on import
    except ImportError as err:
        raise ImportError(f"{SOLO_INSTALL_HINT} ({err})") from err

    for table, entries in ((solo_methods.METHODS, plugin_methods()), (BaseMethod._BACKBONES, plugin_backbones())):
        for name, impl in entries.items():
            if table.get(name, impl) is not impl:
                raise RuntimeError(f"solo-learn already has a different {name!r}: {table[name]!r}")
            table[name] = impl
    return solo_methods.METHODS
