"""The Barlow Twins / VICReg family: what ``mabt`` and ``mavicreg`` share beyond the m-view base.

Both learn the eigenfunctions of the augmentation kernel (Agrawal, Ghosh, Sodhani, Oberman,
Richards; NeurIPS 2024): an invariance term plus an orthogonality term whose weight beta is the
family's (``auto``: the small-projector rule, ``config/beta.py``), and the same two objectives
(``leave_one_out``, ours; ``fastssl``, the authors' release) with their redundancy variants.
"""

from __future__ import annotations

from typing import Any, ClassVar, Dict

import omegaconf

from mvssl_plugin.config.beta import BetaSlot, resolve_beta
from mvssl_plugin.config.views import views_of
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.losses.objectives import OBJECTIVES, REDUNDANCY_ALIASES, REDUNDANCY_MODES, check_pair
from mvssl_plugin.methods.base import MultiViewMethod


class BarlowVICRegMethod(MultiViewMethod):
    """An m-view method with an orthogonality weight and the family's objectives.

    Extra cfg settings (``method_kwargs``), besides :class:`MultiViewMethod`'s:
        objective (str): ``leave_one_out`` (default: each view against the mean of the
            others; exact m = 2 parity with solo-learn) or ``fastssl`` (the authors'
            released loss, exactly; implies the one-call forward).
        redundancy (str): ``per_view`` (default) or ``mean_embedding`` (a cheaper variant
            of ours, leave_one_out only).
        fused_forward (bool | null): null (default) is on for ``fastssl``, off otherwise
            (off keeps m = 2 bit-identical to solo-learn's two-view method).
    """

    #: where this method keeps its orthogonality weight (``auto`` resolves into it)
    BETA_SLOT: ClassVar[BetaSlot]
    SHARED_DEFAULTS: ClassVar[Dict[str, Any]] = {
        **MultiViewMethod.SHARED_DEFAULTS,
        "objective": "leave_one_out",
        "redundancy": "per_view",
        "fused_forward": None,
    }

    def __init__(self, cfg: omegaconf.DictConfig):
        super().__init__(cfg)
        self.objective: str = cfg.method_kwargs.objective
        self.redundancy: str = cfg.method_kwargs.redundancy

    @classmethod
    def loss_matrices(cls, kwargs: Dict[str, Any], num_views: int) -> int:
        """One D x D matrix per view for the per-view objectives, one for the mean-embedding
        variants and the released Barlow Twins loss."""
        per_view = kwargs.get("objective", "leave_one_out") != "fastssl" and kwargs.get("redundancy") == "per_view"
        return num_views if per_view else 1

    @classmethod
    def add_and_assert_specific_cfg(cls, cfg: omegaconf.DictConfig) -> omegaconf.DictConfig:
        """The base's checks, then ``auto`` beta resolved into :attr:`BETA_SLOT`."""
        cfg = super().add_and_assert_specific_cfg(cfg)
        resolve_beta(cfg, cls.BETA_SLOT, cfg.method_kwargs.objective)
        return cfg

    @classmethod
    def check_kwargs(cls, cfg: omegaconf.DictConfig) -> None:
        kwargs = cfg.method_kwargs
        for key, choices in (("objective", OBJECTIVES), ("redundancy", (*REDUNDANCY_MODES, *REDUNDANCY_ALIASES))):
            if kwargs[key] not in choices:
                raise ConfigError(f"method_kwargs.{key}={kwargs[key]!r}: choose one of {choices}")
        try:
            kwargs.redundancy = check_pair(kwargs.objective, kwargs.redundancy)
        except ValueError as err:
            raise ConfigError(f"method_kwargs: {err}") from None
        if kwargs.fused_forward is None:
            kwargs.fused_forward = kwargs.objective == "fastssl"
        if kwargs.objective == "fastssl" and kwargs.fused_forward is False:
            raise ConfigError(
                "method_kwargs.objective=fastssl forwards all views in one call (BatchNorm sees m x batch "
                "images, as the released code): drop fused_forward=false, or use objective=leave_one_out"
            )
        if kwargs.objective == "fastssl" and views_of(cfg).small:
            raise ConfigError(
                "method_kwargs.objective=fastssl forwards all views in one call, which needs views of one "
                "resolution: drop the small crops, or use objective=leave_one_out"
            )
