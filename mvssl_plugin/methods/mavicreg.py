"""Multi-view VICReg as a solo-learn method (``method: mavicreg``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from mvssl_plugin.config.beta import VICREG_SLOT
from mvssl_plugin.config.values import AUTO, non_negative, positive
from mvssl_plugin.losses import multiview_vicreg_loss
from mvssl_plugin.methods.barlow_vicreg import BarlowVICRegMethod


class MultiAugVICReg(BarlowVICRegMethod):
    """VICReg over m views (see :func:`~mvssl_plugin.losses.multiview_vicreg_loss`).

    Extra cfg settings (besides :class:`BarlowVICRegMethod`'s), under ``method_kwargs``:
        sim_loss_weight (float): invariance weight. Defaults to 25.
        var_loss_weight (float): variance weight. Defaults to 25.
        cov_loss_weight (float | "auto"): covariance weight; ``auto`` (default) sets it to
            sim_loss_weight x beta_c / proj_output_dim (beta is the covariance/invariance ratio).
        beta_c (float): the rule's c (default: fitted to the authors' released weights).
    """

    loss_metric = "train_vicreg_loss"
    BETA_SLOT = VICREG_SLOT
    DEFAULTS = {"sim_loss_weight": 25.0, "var_loss_weight": 25.0, "cov_loss_weight": AUTO}
    RULES = (
        ("method_kwargs.sim_loss_weight", non_negative, "must be a number >= 0"),
        ("method_kwargs.var_loss_weight", non_negative, "must be a number >= 0"),
        ("method_kwargs.beta_c", positive, "must be a number > 0"),
        ("method_kwargs.beta_multiview_factor", positive, "must be a number > 0"),
    )

    def __init__(self, cfg):
        super().__init__(cfg)
        kwargs = cfg.method_kwargs
        self.sim_loss_weight: float = kwargs.sim_loss_weight
        self.var_loss_weight: float = kwargs.var_loss_weight
        self.cov_loss_weight: float = kwargs.cov_loss_weight

    def multiview_loss(self, z: Sequence[torch.Tensor]) -> torch.Tensor:
        return multiview_vicreg_loss(
            z,
            sim_loss_weight=self.sim_loss_weight,
            var_loss_weight=self.var_loss_weight,
            cov_loss_weight=self.cov_loss_weight,
            redundancy=self.redundancy,
            objective=self.objective,
        )
