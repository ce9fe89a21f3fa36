"""mvssl-plugin: multi-view Barlow Twins / VICReg, MMCR and the small-projector beta rule for solo-learn.

Layers, bottom up (imports only point down):
``losses/``, ``backbones/`` (pure torch; ``losses.objectives`` is the Barlow Twins / VICReg
family's vocabulary), ``beta_rule`` and ``peak_ram`` (pure Python: the small-projector rule,
a run's peak-RAM arithmetic), ``runs`` (run folders on disk), ``errors``; ``config/`` (checks
of a composed config; ``config.views`` owns the view count m); ``data/`` (datasets, the
ImageFolder-tree code, the DALI and in-memory pipelines, the data keys' checks) and
``methods/`` (solo-learn adapters); ``registry`` (names -> implementations); ``eval/``
(evaluations); ``train/`` (the Lightning flow of a pretraining or linear run); ``cli/``
(entry points). Importing this package imports nothing heavy; ``register()`` does.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    """``mvssl_plugin.register``: :func:`mvssl_plugin.registry.register`, imported on first use
    (it adds the plugin's methods and backbones to solo-learn's tables)."""
    if name == "register":
        from mvssl_plugin.registry import register

        return register
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["__version__", "register"]
