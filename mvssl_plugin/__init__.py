"""mvssl-plugin: multi-view Barlow Twins / VICReg and the small-projector beta rule for solo-learn.

Layers, bottom up (imports only point down):
``losses/``, ``backbones/`` (pure torch), ``beta_rule``, ``objectives``, ``memory_estimate``
(pure Python: the small-projector rule, the family's vocabulary, the peak-memory arithmetic),
``runs`` and ``imagefolder`` (files on disk), ``errors``; ``config/`` (checks of a composed config);
``data/`` and ``methods/`` (solo-learn adapters); ``registry`` (names -> implementations);
``eval/`` (evaluations, effective rank during training); ``train/`` (the Lightning flow of a
pretraining or linear run); ``cli/`` (entry points). Importing this package imports
nothing heavy; ``register()`` does.
"""

__version__ = "0.1.0"


def register():
    """Adds ``mabt``, ``mavicreg`` and the plugin's backbones to solo-learn's tables."""
    from mvssl_plugin.registry import register as _register

    return _register()


__all__ = ["__version__", "register"]
