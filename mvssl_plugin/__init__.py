"""mvssl-plugin: multi-view Barlow Twins / VICReg, MMCR and the small-projector beta rule for solo-learn.

Layers, bottom up (imports only point down):
``losses/``, ``backbones/`` (pure torch; ``losses.objectives`` is the Barlow Twins / VICReg
family's vocabulary), ``beta_rule``, ``lr_ramps`` and ``peak_ram`` (pure Python: the
small-projector rule, the lr's warm-up and tail, a run's peak-RAM arithmetic), ``files`` (atomic
writes, CSV / JSON), ``runs`` (run folders on disk, their checkpoints), ``run_lock`` (the run
lock), ``errors``; ``config/`` (checks of a composed config; ``config.views`` owns the view
count m); ``data/`` (solo-learn's datasets, transforms and loaders, one module a job, the
ImageFolder-tree code, the DALI and in-memory pipelines, the data keys' checks);
``methods/`` (solo-learn adapters); ``registry`` (names -> implementations); ``eval/``
(evaluations); ``encoder/`` (an exported backbone: export, load, embed, UMAP); ``train/`` (the
Lightning flow of a pretraining or linear run); ``cli/`` (entry points). docs/architecture.md
has the list, tests/test_layers.py checks it. Importing this package imports nothing heavy;
``register()`` does, and ``load_encoder`` imports torch only.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    """``mvssl_plugin.register``: :func:`mvssl_plugin.registry.register`, imported on first use
    (it adds the plugin's methods and backbones to solo-learn's tables)."""
    if name == "register":
        # local: loaded on first use; importing the package stays standard library (no omegaconf)
        from mvssl_plugin.registry import register

        return register
    if name == "load_encoder":
        # local: loaded on first use; torch, safetensors and the backbones (no solo-learn) take ~3 s
        from mvssl_plugin.encoder.model import load_encoder

        return load_encoder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["__version__", "load_encoder", "register"]
