"""What the multi-view methods share on top of solo-learn's ``BaseMethod``.

solo-learn already forwards any number of crops (large ones through the online
classifier, small ones through ``multicrop_forward``); this class adds the projector,
the optional one-call forward of all views, the finite-loss guard and the logging, and
leaves each subclass one thing to define: its loss over the m projected views.
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Sequence, Tuple

import omegaconf
import torch
import torch.distributed as dist
import torch.nn as nn
from solo.methods.base import BaseMethod
from solo.utils.misc import omegaconf_select

from mvssl_plugin.config import check_augmentations, check_projector_dims, check_view_parallel, resolve_beta
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.losses import REDUNDANCY_MODES
from mvssl_plugin.losses.distributed import gather_batch, is_distributed


def build_projector(features_dim: int, hidden_dim: int, output_dim: int) -> nn.Sequential:
    """solo-learn's Barlow Twins / VICReg projector (3 linear layers), so that the
    built-in methods and the plugin's differ only in their loss."""
    return nn.Sequential(
        nn.Linear(features_dim, hidden_dim),
        nn.BatchNorm1d(hidden_dim),
        nn.ReLU(),
        nn.Linear(hidden_dim, hidden_dim),
        nn.BatchNorm1d(hidden_dim),
        nn.ReLU(),
        nn.Linear(hidden_dim, output_dim),
    )


class MultiViewMethod(BaseMethod):
    """Base of the m-view methods; subclasses implement :meth:`multiview_loss`.

    Extra cfg settings:
        method_kwargs:
            proj_hidden_dim (int): hidden width of the projector.
            proj_output_dim (int): projector output dimension d.
            redundancy (str): ``per_view`` (exact loss) or ``mean`` (one redundancy
                matrix on the mean embedding, the authors' cheaper variant).
            fused_forward (bool): forward all views of one resolution in one backbone
                call (faster; BatchNorm then sees m x batch images, so m = 2 is no longer
                bit-identical to the two-view method). Defaults to False.
            view_parallel (bool): under DDP, spread the views over the processes instead
                of the images (m / world size views each, the same images everywhere).
                Per-view, it trains exactly as one process with all m views. Defaults to False.
    """

    #: metric name, shared with the matching solo-learn method so curves overlay in wandb
    loss_metric: str = "train_multiview_loss"

    def __init__(self, cfg: omegaconf.DictConfig):
        super().__init__(cfg)
        kwargs = cfg.method_kwargs
        self.redundancy: str = kwargs.redundancy
        self.fused_forward: bool = kwargs.fused_forward
        self.view_parallel: bool = kwargs.view_parallel
        self.projector = build_projector(self.features_dim, kwargs.proj_hidden_dim, kwargs.proj_output_dim)

    @staticmethod
    def add_and_assert_specific_cfg(cfg: omegaconf.DictConfig) -> omegaconf.DictConfig:
        cfg = super(MultiViewMethod, MultiViewMethod).add_and_assert_specific_cfg(cfg)
        # the entry points check these before building anything; repeated for direct use
        check_augmentations(cfg, multiview=True)
        check_projector_dims(cfg, required=True)
        cfg.method_kwargs.redundancy = omegaconf_select(cfg, "method_kwargs.redundancy", "per_view")
        if cfg.method_kwargs.redundancy not in REDUNDANCY_MODES:
            raise ConfigError(
                f"method_kwargs.redundancy={cfg.method_kwargs.redundancy!r}: choose one of {REDUNDANCY_MODES}"
            )
        cfg.method_kwargs.fused_forward = omegaconf_select(cfg, "method_kwargs.fused_forward", False)
        if not isinstance(cfg.method_kwargs.fused_forward, bool):
            raise ConfigError(f"method_kwargs.fused_forward={cfg.method_kwargs.fused_forward!r}: use true or false")
        cfg.method_kwargs.view_parallel = omegaconf_select(cfg, "method_kwargs.view_parallel", False)
        check_view_parallel(cfg)
        resolve_beta(cfg)
        return cfg

    @property
    def learnable_params(self) -> List[dict]:
        return super().learnable_params + [{"name": "projector", "params": self.projector.parameters()}]

    def forward(self, X: torch.Tensor) -> Dict[str, Any]:
        out = super().forward(X)
        out["z"] = self.projector(out["feats"])
        return out

    def multicrop_forward(self, X: torch.Tensor) -> Dict[str, Any]:
        out = super().multicrop_forward(X)
        out["z"] = self.projector(out["feats"])
        return out

    def multiview_loss(self, z: Sequence[torch.Tensor]) -> torch.Tensor:
        """Self-supervised loss over the m projected views, each ``(N, proj_output_dim)``."""
        raise NotImplementedError

    @contextlib.contextmanager
    def _crop_counts(self, num_large: int, num_small: int) -> Iterator[None]:
        """Lets solo-learn's step see ``num_large``/``num_small`` crops for one call."""
        saved = self.num_large_crops, self.num_small_crops, self.num_crops, self.multicrop
        self.num_large_crops, self.num_small_crops = num_large, num_small
        self.num_crops, self.multicrop = num_large + num_small, num_small > 0
        try:
            yield
        finally:
            self.num_large_crops, self.num_small_crops, self.num_crops, self.multicrop = saved

    def _forward_views(
        self, indexes: torch.Tensor, large: List[torch.Tensor], small: List[torch.Tensor], targets, batch_idx: int
    ) -> Tuple[Dict[str, Any], List[torch.Tensor]]:
        """solo-learn's shared step over the given views; returns its outputs and each view's z.

        Per-view by default; with ``fused_forward`` each resolution's views go through the
        backbone as one concatenated crop (targets repeated so the online classifier and
        kNN see the same pairs as per-view).
        """
        if not self.fused_forward:
            with self._crop_counts(len(large), len(small)):
                out = BaseMethod.training_step(self, [indexes, large + small, targets], batch_idx)
            return out, list(out["z"])
        fused = [torch.cat(large)] + ([torch.cat(small)] if small else [])
        with self._crop_counts(1, int(bool(small))):
            out = BaseMethod.training_step(self, [indexes, fused, targets.repeat(len(large))], batch_idx)
        z = list(out["z"][0].chunk(len(large)))
        if small:
            z += list(out["z"][1].chunk(len(small)))
        return out, z

    def training_step(self, batch: Sequence[Any], batch_idx: int) -> torch.Tensor:
        """solo-learn's shared step (online classifier, kNN, metrics) plus the m-view loss.

        With ``view_parallel`` under DDP every process gets the same images (no sampler
        sharding), forwards its own contiguous share of the views, and the projected views
        are gathered (autograd-aware) so each process computes the loss over all m views.
        """
        indexes, views, targets = batch
        views = [views] if isinstance(views, torch.Tensor) else list(views)
        if len(views) != self.num_crops:
            raise ValueError(f"expected {self.num_crops} views per image from the loader, got {len(views)}")
        large, small = views[: self.num_large_crops], views[self.num_large_crops :]
        split = self.view_parallel and is_distributed()
        if split:
            share = len(large) // dist.get_world_size()
            large = large[dist.get_rank() * share : (dist.get_rank() + 1) * share]
        out, z = self._forward_views(indexes, large, small, targets, batch_idx)
        if split:
            z = list(gather_batch(torch.stack(z), dim=0))
        ssl_loss = self.multiview_loss(z)
        if not torch.isfinite(ssl_loss):
            raise FloatingPointError(
                f"{self.loss_metric} is {ssl_loss.item()} at epoch {self.current_epoch}, step {self.global_step}: "
                "training stopped before the weights were updated, and checkpoints already written are kept. "
                "Lower optimizer.lr, check the data normalization, or train with precision=32."
            )
        self.log(self.loss_metric, ssl_loss, on_epoch=True, sync_dist=True)
        return ssl_loss + out["loss"]
