"""Multi-view VICReg as a solo-learn method (``method: mavicreg``)."""

from __future__ import annotations

from typing import Sequence

import omegaconf
import torch
from solo.utils.misc import omegaconf_select

from mvssl_plugin.config import AUTO
from mvssl_plugin.losses import multiview_vicreg_loss
from mvssl_plugin.methods.base import MultiViewMethod


class MultiAugVICReg(MultiViewMethod):
    """VICReg over m views: invariance to the mean of the other views, variance and
    covariance per view.

    Extra cfg settings (besides :class:`MultiViewMethod`'s):
        method_kwargs:
            sim_loss_weight (float): invariance weight. Defaults to 25.
            var_loss_weight (float): variance weight. Defaults to 25.
            cov_loss_weight (float | "auto"): covariance weight; ``auto`` (default) sets
                it to sim_loss_weight * beta_c / proj_output_dim, halved for m > 2.
            beta_c (float): the rule's c. Defaults to 81.92 (VICReg's 25/1 at d = 2048).
    """

    loss_metric = "train_vicreg_loss"

    def __init__(self, cfg: omegaconf.DictConfig):
        super().__init__(cfg)
        kwargs = cfg.method_kwargs
        self.sim_loss_weight: float = kwargs.sim_loss_weight
        self.var_loss_weight: float = kwargs.var_loss_weight
        self.cov_loss_weight: float = kwargs.cov_loss_weight

    @staticmethod
    def add_and_assert_specific_cfg(cfg: omegaconf.DictConfig) -> omegaconf.DictConfig:
        cfg.method_kwargs = omegaconf_select(cfg, "method_kwargs", {})
        cfg.method_kwargs.sim_loss_weight = omegaconf_select(cfg, "method_kwargs.sim_loss_weight", 25.0)
        cfg.method_kwargs.var_loss_weight = omegaconf_select(cfg, "method_kwargs.var_loss_weight", 25.0)
        cfg.method_kwargs.cov_loss_weight = omegaconf_select(cfg, "method_kwargs.cov_loss_weight", AUTO)
        return super(MultiAugVICReg, MultiAugVICReg).add_and_assert_specific_cfg(cfg)

    def multiview_loss(self, z: Sequence[torch.Tensor]) -> torch.Tensor:
        return multiview_vicreg_loss(
            z,
            sim_loss_weight=self.sim_loss_weight,
            var_loss_weight=self.var_loss_weight,
            cov_loss_weight=self.cov_loss_weight,
            redundancy=self.redundancy,
        )
