"""solo-learn adapters: one class per method, registered by ``mvssl_plugin.register()``."""

from mvssl_plugin.methods.base import MultiViewMethod
from mvssl_plugin.methods.mabt import MultiAugBarlowTwins
from mvssl_plugin.methods.mavicreg import MultiAugVICReg

__all__ = ["MultiAugBarlowTwins", "MultiAugVICReg", "MultiViewMethod"]

# solo-learn imported by the lines above, while they were half done: register now
from mvssl_plugin._autoregister import run_pending  # noqa: E402

run_pending()
