"""Multi-view MMCR as a solo-learn method (``method: mmcr``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from mvssl_plugin.config.values import non_negative
from mvssl_plugin.losses import mmcr_loss
from mvssl_plugin.methods.base import MultiViewMethod


class MultiViewMMCR(MultiViewMethod):
    """Maximum manifold capacity representations over m views (see
    :func:`~mvssl_plugin.losses.mmcr_loss`; Yerxa et al., NeurIPS 2023).

    Extra cfg settings (besides :class:`MultiViewMethod`'s), under ``method_kwargs``:
        local_weight (float): lambda, the weight of each image's own nuclear norm (>= 0,
            default 0: the centroid term alone).
    """

    loss_metric = "train_mmcr_loss"
    DEFAULTS = {"local_weight": 0.0}
    RULES = (("method_kwargs.local_weight", non_negative, "must be a number >= 0"),)

    def __init__(self, cfg):
        super().__init__(cfg)
        self.local_weight: float = cfg.method_kwargs.local_weight

    def multiview_loss(self, z: Sequence[torch.Tensor]) -> torch.Tensor:
        return mmcr_loss(z, local_weight=self.local_weight)
