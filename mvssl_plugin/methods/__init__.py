"""solo-learn adapters: one class per method, registered by ``mvssl_plugin.register()``."""

import contextlib

try:  # the bridge to solo-learn's scripts: a top-level module next to the package (absent from a bare tree)
    from mvssl_plugin_autoregister import hooks_held
except ImportError:
    hooks_held = contextlib.nullcontext

with hooks_held():  # these import solo-learn, whose hook registers these very classes: after them
    from mvssl_plugin.methods.barlow_vicreg import BarlowVICRegMethod
    from mvssl_plugin.methods.base import MultiViewMethod
    from mvssl_plugin.methods.mabt import MultiAugBarlowTwins
    from mvssl_plugin.methods.mavicreg import MultiAugVICReg
    from mvssl_plugin.methods.mmcr import MultiViewMMCR

__all__ = ["BarlowVICRegMethod", "MultiAugBarlowTwins", "MultiAugVICReg", "MultiViewMMCR", "MultiViewMethod"]
