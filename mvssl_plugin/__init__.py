"""mvssl-plugin: multi-view Barlow Twins / VICReg, MMCR and the small-projector beta rule for solo-learn.

Layers, bottom up (imports only point down):
``losses/``, ``backbones/`` (pure torch; ``losses.objectives`` is the Barlow Twins / VICReg
family's vocabulary), ``beta_rule`` and ``peak_ram`` (pure Python: the small-projector rule,
a run's peak-RAM arithmetic), ``runs`` (run folders on disk), ``errors``; ``config/`` (checks
of a composed config; ``config.views`` owns the view count m); ``data/`` (datasets, the
ImageFolder-tree code, the DALI and in-memory pipelines, the data keys' checks) and
``methods/`` (solo-learn adapters); ``registry`` (names -> implementations); ``eval/``
(evaluations); ``train/`` (the Lightning flow of a pretraining or linear run); ``cli/``
(entry points); ``encoder/`` (an exported backbone: export, load, embed, UMAP). Importing this
package imports nothing heavy; ``register()`` does, and ``load_encoder`` imports torch only.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    """``mvssl_plugin.register``: :func:`mvssl_plugin.registry.register`, imported on first use
    (it adds the plugin's methods and backbones to solo-learn's tables)."""
    if name == "register":
        from mvssl_plugin.registry import register

        return register
    if name == "load_encoder":  # torch, safetensors and the plugin's backbones: no solo-learn
        from mvssl_plugin.encoder.model import load_encoder

        return load_encoder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["__version__", "load_encoder", "register"]
