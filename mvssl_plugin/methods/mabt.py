"""Multi-view Barlow Twins as a solo-learn method (``method: mabt``)."""

from __future__ import annotations

from typing import Sequence

import omegaconf
import torch
from solo.utils.misc import omegaconf_select

from mvssl_plugin.config import AUTO
from mvssl_plugin.losses import multiview_barlow_loss
from mvssl_plugin.methods.base import MultiViewMethod


class MultiAugBarlowTwins(MultiViewMethod):
    """Barlow Twins over m views: each view cross-correlated with the mean of the others.

    Extra cfg settings (besides :class:`MultiViewMethod`'s):
        method_kwargs:
            lamb (float | "auto"): off-diagonal weight beta; ``auto`` (default) applies
                beta = beta_c / proj_output_dim, halved for m > 2.
            beta_c (float): the rule's c. Defaults to 3.3 (authors' CIFAR-10 sweep).
            scale_loss (float): overall factor, as solo-learn's. Defaults to 0.024.
    """

    loss_metric = "train_barlow_loss"

    def __init__(self, cfg: omegaconf.DictConfig):
        super().__init__(cfg)
        self.lamb: float = cfg.method_kwargs.lamb
        self.scale_loss: float = cfg.method_kwargs.scale_loss

    @staticmethod
    def add_and_assert_specific_cfg(cfg: omegaconf.DictConfig) -> omegaconf.DictConfig:
        cfg.method_kwargs = omegaconf_select(cfg, "method_kwargs", {})
        cfg.method_kwargs.lamb = omegaconf_select(cfg, "method_kwargs.lamb", AUTO)
        cfg.method_kwargs.scale_loss = omegaconf_select(cfg, "method_kwargs.scale_loss", 0.024)
        return super(MultiAugBarlowTwins, MultiAugBarlowTwins).add_and_assert_specific_cfg(cfg)

    def multiview_loss(self, z: Sequence[torch.Tensor]) -> torch.Tensor:
        return multiview_barlow_loss(z, lamb=self.lamb, scale_loss=self.scale_loss, redundancy=self.redundancy)
