"""What the multi-view methods share on top of solo-learn's ``BaseMethod``.

solo-learn already forwards any number of crops (large ones through the online
classifier, small ones through ``multicrop_forward``); this class adds the projector,
the optional one-call forward of all views, view-parallel DDP, the finite-loss guard and
the logging, and leaves each subclass its facts (defaults, kwarg rules, what its loss
holds in memory) and its loss over the m projected views. A family of methods that shares
more (Barlow Twins and VICReg: an orthogonality weight, the objectives) has its own class
below its methods (``methods/barlow_vicreg.py``).

The contract is solo-learn's: a method is built from any config its own methods accept
(``data.num_large_crops`` / ``num_small_crops``, no ``augmentations`` needed), and all
of its checks live in :meth:`add_and_assert_specific_cfg`, which ``BaseMethod.__init__``
calls and the entry points call early, before anything is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Dict, List, Optional, Tuple

import omegaconf
import torch
import torch.distributed as dist
from solo.methods.base import BaseMethod
from solo.utils.misc import omegaconf_select
from torch import nn

from mvssl_plugin.config.beta import BetaSlot
from mvssl_plugin.config.hardware import finite_check_every, world_size
from mvssl_plugin.config.values import Rule, apply_rules, boolean, is_int, select
from mvssl_plugin.config.views import restore_crop_counts, showing_crops, views_of
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.losses.distributed import gather_batch, is_distributed
from mvssl_plugin.methods.compiled import compile_forwards
from mvssl_plugin.methods.finite_loss import FiniteLoss
from mvssl_plugin.methods.hard_views import hardest_views
from mvssl_plugin.methods.loss_precision import loss_fp32

#: ``solo``: solo-learn's Barlow Twins / VICReg projector (3 linear layers), so the
#: built-in methods and the plugin's differ only in their loss; ``paper``: the authors'
#: released projector (2 layers, the first without bias).
PROJECTORS = ("solo", "paper")


def build_projector(kind: str, features_dim: int, hidden_dim: int, output_dim: int) -> nn.Sequential:
    """The projector ``kind`` names (see :data:`PROJECTORS`)."""
    if kind == "paper":
        return nn.Sequential(
            nn.Linear(features_dim, hidden_dim, bias=False),
            nn.BatchNorm1d(hidden_dim),
            nn.ReLU(),
            nn.Linear(hidden_dim, output_dim),
        )
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
    """Base of the m-view methods; subclasses set their facts and implement :meth:`multiview_loss`.

    Extra cfg settings (``method_kwargs``), shared by every multi-view method:
        proj_hidden_dim (int), proj_output_dim (int): projector widths; d is the output.
        projector (str): ``solo`` (default, 3 layers) or ``paper`` (the authors' 2 layers).
        fused_forward (bool): forward all views of one resolution in one backbone call
            (BatchNorm then sees m x batch images); off by default (per-view, as solo-learn).
        view_parallel (bool): under DDP, spread the views over the processes instead of
            the images (m / world size views each, the same images everywhere).
        hard_views (int): train each image on its k hardest views of the m the loader cuts
            (hard positive mining, ``methods/hard_views.py``); null (default) or 0: on all m.
        hard_views_side (int): the side, in pixels, the hard views are chosen at (null: the
            views' own; smaller costs less).

    ``performance.compile: true`` compiles the backbone's and projector's forward with
    ``torch.compile`` (first steps slower while it compiles; ``methods/compiled.py``).
    """

    #: metric name, shared with the matching solo-learn method so curves overlay in wandb
    loss_metric: ClassVar[str] = "train_multiview_loss"
    #: where this method keeps its orthogonality weight (``auto`` resolves into it); None: it has none
    BETA_SLOT: ClassVar[Optional[BetaSlot]] = None
    #: this method's own kwarg defaults and rules
    DEFAULTS: ClassVar[Dict[str, Any]] = {}
    RULES: ClassVar[Tuple[Rule, ...]] = ()
    #: kwargs every multi-view method reads (solo-learn's built-ins do not)
    SHARED_DEFAULTS: ClassVar[Dict[str, Any]] = {
        "projector": "solo",
        "fused_forward": False,
        "view_parallel": False,
        "hard_views": None,
        "hard_views_side": None,
    }

    def __init__(self, cfg: omegaconf.DictConfig):
        super().__init__(cfg)
        kwargs = cfg.method_kwargs
        self.fused_forward: bool = kwargs.fused_forward
        self.view_parallel: bool = kwargs.view_parallel
        self.hard_views: int = kwargs.hard_views or 0
        self.hard_views_side: Optional[int] = kwargs.hard_views_side
        # float32 unless performance.loss_fp32=false asks for autocast's precision (methods/loss_precision.py)
        self.loss_fp32: bool = loss_fp32(cfg, default=True)
        # steps between read-backs of the loss's finiteness: 1 on a CPU (free; stops before a
        # non-finite loss moves the weights), else the FiniteLoss callback's flag on the device
        self.finite_check_every: int = finite_check_every(cfg)
        self.projector = build_projector(
            kwargs.projector, self.features_dim, kwargs.proj_hidden_dim, kwargs.proj_output_dim
        )
        if select(cfg, "performance.compile", False):
            compile_forwards(self)  # methods/compiled.py: the forwards, so checkpoints load uncompiled

    @classmethod
    def defaults(cls) -> Dict[str, Any]:
        """Every ``method_kwargs`` default of this method, shared ones included."""
        return {**cls.SHARED_DEFAULTS, **cls.DEFAULTS}

    @classmethod
    def loss_matrices(cls, kwargs: Dict[str, Any], num_views: int) -> int:
        """D x D matrices (or matrices of that size) the loss keeps alive with their
        gradients, for the memory estimate (``train/peak_ram_check.py``)."""
        return 1

    @classmethod
    def add_and_assert_specific_cfg(cls, cfg: omegaconf.DictConfig) -> omegaconf.DictConfig:
        """Fills this method's defaults and checks its keys (:meth:`check_kwargs` for a
        method's or family's own).

        Reads the views from ``data.num_large_crops`` / ``num_small_crops`` (solo-learn's
        contract); the augmentation pipelines themselves are the entry points' to check.
        """
        restore_crop_counts(cfg)  # hidden from solo-learn's main_pretrain.py (see config.views)
        cfg = BaseMethod.add_and_assert_specific_cfg(cfg)
        kwargs = cfg.method_kwargs
        for key, default in cls.defaults().items():
            kwargs[key] = omegaconf_select(cfg, f"method_kwargs.{key}", default)
        for key in ("proj_output_dim", "proj_hidden_dim"):
            value = select(cfg, f"method_kwargs.{key}")
            if value is None:
                raise ConfigError(f"method_kwargs.{key} is missing: set it, e.g. method_kwargs.{key}=256")
            if not is_int(value) or value < 1:
                raise ConfigError(f"method_kwargs.{key}={value!r}: must be an integer >= 1")
        if kwargs.projector not in PROJECTORS:
            raise ConfigError(f"method_kwargs.projector={kwargs.projector!r}: choose one of {PROJECTORS}")
        cls.check_kwargs(cfg)
        if kwargs.fused_forward is None:  # null: the method's default (a recipe shared with the BT/VICReg family)
            kwargs.fused_forward = False
        for key in ("fused_forward", "view_parallel"):
            if not boolean(kwargs[key]):
                raise ConfigError(f"method_kwargs.{key}={kwargs[key]!r}: use true or false")
        views = views_of(cfg)
        m, small = views.m, views.small
        if m < 2:
            raise ConfigError(
                f"method={cfg.method} needs at least 2 views per image, the config gives {m}: "
                "set data.num_views (or augmentations[0].num_crops) to 2 or more"
            )
        if kwargs.view_parallel:
            world = world_size(cfg)
            if small:
                raise ConfigError(
                    "method_kwargs.view_parallel=true needs views of one resolution (one augmentation pipeline); "
                    "mixed-resolution recipes spread images, not views"
                )
            if world < 2 or m % world != 0:
                raise ConfigError(
                    f"method_kwargs.view_parallel=true spreads {m} views over {world} process(es): "
                    "use devices that divide the number of views (at least 2), or view_parallel=false"
                )
        cls._check_hard_views(cfg)
        apply_rules(cfg, cls.RULES)
        return cfg

    @staticmethod
    def _check_hard_views(cfg: omegaconf.DictConfig) -> None:
        """``hard_views`` keeps 2 to m - 1 of one resolution's views; its side is a pixel count."""
        kwargs, views = cfg.method_kwargs, views_of(cfg)
        keep, side = kwargs.hard_views, kwargs.hard_views_side
        if keep is not None and (not is_int(keep) or keep < 0):
            raise ConfigError(f"method_kwargs.hard_views={keep!r}: the views each image trains on, an integer (0: all)")
        if side is not None and (not is_int(side) or side < 8):
            raise ConfigError(f"method_kwargs.hard_views_side={side!r}: a side in pixels, an integer >= 8, or null")
        if not keep:
            return
        if views.small or kwargs.view_parallel:
            raise ConfigError(
                f"method_kwargs.hard_views={keep} chooses among views of one resolution on each process: "
                "use one augmentation pipeline and view_parallel=false, or hard_views=0"
            )
        if not 2 <= keep < views.m:
            raise ConfigError(
                f"method_kwargs.hard_views={keep} of data.num_views={views.m}: keep at least 2 and fewer than the "
                f"views cut, e.g. data.num_views={max(keep, 2) * 2} method_kwargs.hard_views={max(keep, 2)}"
            )

    @classmethod
    def check_kwargs(cls, cfg: omegaconf.DictConfig) -> None:
        """A method's (or family's) own choices, checked after the defaults are filled."""

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

    def configure_callbacks(self) -> List[FiniteLoss]:
        """The run's ``FiniteLoss``, where the entry point did not put one first (solo-learn's own
        scripts): with ``finite_check_every > 1`` it is the only reader of the loss's finiteness."""
        if any(isinstance(callback, FiniteLoss) for callback in self.trainer.callbacks):
            return []
        return [FiniteLoss(self.finite_check_every)]

    def check_finite(self, loss: torch.Tensor) -> None:
        """Raises ``FloatingPointError`` at a non-finite loss before it moves the weights, where the
        check reads back every step (a CPU, where the read is free). Otherwise nothing here: the
        ``FiniteLoss`` callback keeps the flag on the device and reads it every
        ``finite_check_every`` steps and at each epoch's end, one read-back for the whole step."""
        if self.finite_check_every == 1 and not bool(torch.isfinite(loss)):
            raise FloatingPointError(
                f"{self.loss_metric} is {loss.item()} at epoch {self.current_epoch}, step {self.global_step}: "
                "training stopped before the weights were updated, and checkpoints already written are kept. "
                "Lower optimizer.lr, check the data normalization, or train with precision=32."
            )

    def multiview_loss(self, z: Sequence[torch.Tensor]) -> torch.Tensor:
        """Self-supervised loss over the m projected views, each ``(N, proj_output_dim)``."""
        raise NotImplementedError

    def _forward_views(
        self, indexes: torch.Tensor, large: List[torch.Tensor], small: List[torch.Tensor], targets, batch_idx: int
    ) -> Tuple[Dict[str, Any], List[torch.Tensor]]:
        """solo-learn's shared step over the given views; returns its outputs and each view's z.

        Per-view by default; with ``fused_forward`` each resolution's views go through the
        backbone as one concatenated crop (targets repeated so the online classifier and
        kNN see the same pairs as per-view).
        """
        if not self.fused_forward:
            with showing_crops(self, len(large), len(small)):
                out = BaseMethod.training_step(self, [indexes, large + small, targets], batch_idx)
            return out, list(out["z"])
        fused = [torch.cat(large)] + ([torch.cat(small)] if small else [])
        with showing_crops(self, 1, int(bool(small))):
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
        if self.hard_views:  # the add_and_assert_specific_cfg check: one resolution, no view-parallel
            large = hardest_views(self, large, self.hard_views, self.hard_views_side)
        split = self.view_parallel and is_distributed()
        if split:
            share = len(large) // dist.get_world_size()
            large = large[dist.get_rank() * share : (dist.get_rank() + 1) * share]
        out, z = self._forward_views(indexes, large, small, targets, batch_idx)
        if split:
            z = list(gather_batch(torch.stack(z), dim=0))
        if self.loss_fp32:
            # the loss's D x D products in float32 under mixed precision: autocast would run them in
            # bf16/fp16, whose 8/11-bit mantissas blur the correlations the loss drives to 0 and 1
            with torch.autocast(z[0].device.type, enabled=False):
                ssl_loss = self.multiview_loss([view.float() if view.dtype != torch.float64 else view for view in z])
        else:  # as solo-learn's own methods compute theirs: inside autocast
            ssl_loss = self.multiview_loss(z)
        self.check_finite(ssl_loss.detach())
        self.log(self.loss_metric, ssl_loss, on_epoch=True, sync_dist=True)
        return ssl_loss + out["loss"]
