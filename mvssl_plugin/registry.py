"""The one place where the plugin's names map to implementations.

``register()`` adds them to solo-learn's own tables (``solo.methods.METHODS`` and
``BaseMethod._BACKBONES``), so anything in solo-learn that looks a name up, including its
linear evaluation and auto-resumer, finds them. Calling it again changes nothing.
"""

from __future__ import annotations

from typing import Callable, Dict, Type

METHOD_NAMES = ("mabt", "mavicreg")
BACKBONE_NAMES = ("narrow_resnet18",)
SOLO_INSTALL_HINT = (
    "mvssl-plugin needs solo-learn 1.0.6 from its repository (PyPI's 1.0.2 is too old): "
    "pip install 'setuptools<70' wheel && git clone https://github.com/vturrisi/solo-learn "
    "&& pip install --no-build-isolation ./solo-learn"
)


def plugin_methods() -> Dict[str, Type]:
    from mvssl_plugin.methods import MultiAugBarlowTwins, MultiAugVICReg

    return {"mabt": MultiAugBarlowTwins, "mavicreg": MultiAugVICReg}


def plugin_backbones() -> Dict[str, Callable]:
    from mvssl_plugin.backbones import narrow_resnet18

    return {"narrow_resnet18": narrow_resnet18}


def register() -> Dict[str, Type]:
    """Registers the plugin into solo-learn (idempotent); returns solo-learn's METHODS.

    Raises:
        RuntimeError: if another implementation already holds one of the names.
    """
    try:
        import solo.methods
        from solo.methods.base import BaseMethod
    except ImportError as err:
        raise ImportError(f"{SOLO_INSTALL_HINT} ({err})") from err

    for table, entries in ((solo.methods.METHODS, plugin_methods()), (BaseMethod._BACKBONES, plugin_backbones())):
        for name, impl in entries.items():
            if table.get(name, impl) is not impl:
                raise RuntimeError(f"solo-learn already has a different {name!r}: {table[name]!r}")
            table[name] = impl
    return solo.methods.METHODS
