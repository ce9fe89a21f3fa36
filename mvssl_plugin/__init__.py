"""mvssl-plugin: multi-view Barlow Twins / VICReg and the small-projector beta rule for solo-learn.

Layers, bottom up: ``losses`` and ``beta`` (pure math), ``backbones`` (pure torch);
``config``, ``methods``, ``data`` and ``registry`` (solo-learn adapters); ``cli`` (Hydra
entry points). Importing this package imports nothing heavy; ``register()`` does.
"""

__version__ = "0.1.0"


def register():
    """Adds ``mabt``, ``mavicreg`` and the plugin's backbones to solo-learn's tables."""
    from mvssl_plugin.registry import register as _register

    return _register()


__all__ = ["__version__", "register"]
