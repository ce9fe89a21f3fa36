"""Multi-view Barlow Twins as a solo-learn method (``method: mabt``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from mvssl_plugin.config.beta import BARLOW_SLOT
from mvssl_plugin.config.values import AUTO, positive
from mvssl_plugin.losses import multiview_barlow_loss
from mvssl_plugin.losses.objectives import METHOD_SCALE
from mvssl_plugin.methods.barlow_vicreg import BarlowVICRegMethod


class MultiAugBarlowTwins(BarlowVICRegMethod):
    """Barlow Twins over m views (see :func:`~mvssl_plugin.losses.multiview_barlow_loss`).

    Extra cfg settings (besides :class:`BarlowVICRegMethod`'s), under ``method_kwargs``:
        lamb (float | "auto"): off-diagonal weight beta; ``auto`` (default) applies the
            rule beta = beta_c / proj_output_dim, times the multi-view factor for m > 2.
        beta_c (float): the rule's c (default: fitted to the authors' CIFAR-10 sweep).
        beta_multiview_factor (float): overrides the objective's multi-view factor.
        scale_loss (float | null): overall factor, as solo-learn's. null (default):
            ``losses.objectives.METHOD_SCALE`` (0.024, as solo-learn's ``BarlowTwins``, for
            leave_one_out; 1 for fastssl, whose release has none).
    """

    loss_metric = "train_barlow_loss"
    BETA_SLOT = BARLOW_SLOT
    DEFAULTS = {"lamb": AUTO, "scale_loss": None}
    RULES = (
        ("method_kwargs.scale_loss", positive, "must be a number > 0"),
        ("method_kwargs.beta_c", positive, "must be a number > 0"),
        ("method_kwargs.beta_multiview_factor", positive, "must be a number > 0"),
    )

    @classmethod
    def add_and_assert_specific_cfg(cls, cfg):
        cfg = super().add_and_assert_specific_cfg(cfg)
        if cfg.method_kwargs.scale_loss is None:
            cfg.method_kwargs.scale_loss = METHOD_SCALE[cfg.method_kwargs.objective]
        return cfg

    def __init__(self, cfg):
        super().__init__(cfg)
        self.lamb: float = cfg.method_kwargs.lamb
        self.scale_loss: float = cfg.method_kwargs.scale_loss

    def multiview_loss(self, z: Sequence[torch.Tensor]) -> torch.Tensor:
        return multiview_barlow_loss(
            z, lamb=self.lamb, scale_loss=self.scale_loss, redundancy=self.redundancy, objective=self.objective
        )
