"""solo-learn adapters: one class per method, registered by ``mvssl_plugin.register()``."""

from mvssl_plugin.methods.barlow_vicreg import BarlowVICRegMethod
from mvssl_plugin.methods.base import MultiViewMethod
from mvssl_plugin.methods.mabt import MultiAugBarlowTwins
from mvssl_plugin.methods.mavicreg import MultiAugVICReg
from mvssl_plugin.methods.mmcr import MultiViewMMCR

__all__ = ["BarlowVICRegMethod", "MultiAugBarlowTwins", "MultiAugVICReg", "MultiViewMMCR", "MultiViewMethod"]

# solo-learn imported by the lines above, while they were half done: register now
try:  # the hook is a top-level module next to the package (absent from a bare source tree)
    from mvssl_plugin_autoregister import run_pending  # noqa: E402
except ModuleNotFoundError:
    pass
else:
    run_pending()
