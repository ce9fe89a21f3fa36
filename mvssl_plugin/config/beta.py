"""The home of beta in a config: where each method keeps its orthogonality weight, and
``auto`` resolved into it. The method classes (``BETA_SLOT``, ``add_and_assert_specific_cfg``),
the checks of solo-learn's own methods, the start block and the comparison all ask here.

The rule itself (beta = c / d and its multi-view factor) is pure math in
:mod:`mvssl_plugin.beta_rule`; this module reads and writes the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from omegaconf import DictConfig

from mvssl_plugin import beta_rule
from mvssl_plugin.config.values import AUTO, is_number, select
from mvssl_plugin.config.views import views_of
from mvssl_plugin.errors import ConfigError


@dataclass(frozen=True)
class BetaSlot:
    """Where a method keeps its orthogonality weight, and how beta maps onto it.

    ``weight = beta`` (Barlow Twins' lamb) or ``weight = beta * method_kwargs[relative_to]``
    (VICReg's covariance weight, beta being the covariance/invariance ratio).
    ``loss`` names the loss family (``barlow_twins`` / ``vicreg``) for the rule's
    multi-view factor.
    """

    key: str
    default_c: float
    loss: str
    relative_to: Optional[str] = None
    relative_default: float = 1.0


BARLOW_SLOT = BetaSlot(key="lamb", default_c=beta_rule.BARLOW_TWINS_C, loss="barlow_twins")
VICREG_SLOT = BetaSlot(
    key="cov_loss_weight",
    default_c=beta_rule.VICREG_C,
    loss="vicreg",
    relative_to="sim_loss_weight",
    relative_default=25.0,
)
#: solo-learn's own methods whose orthogonality weight may be ``auto`` too (the plugin's
#: methods name theirs in their class, ``BETA_SLOT``)
SOLO_BETA_SLOTS: Dict[str, BetaSlot] = {"barlow_twins": BARLOW_SLOT, "vicreg": VICREG_SLOT}


def beta_of(slot: Optional[BetaSlot], method_kwargs: Any) -> Optional[float]:
    """The beta a method's kwargs hold (the inverse of :func:`resolve_beta`'s mapping):
    None without a slot or while the weight is not a number yet."""
    weight = method_kwargs.get(slot.key) if slot is not None and method_kwargs is not None else None
    if not is_number(weight):
        return None
    if slot.relative_to is None:
        return float(weight)
    return float(weight) / float(method_kwargs.get(slot.relative_to, slot.relative_default))


def resolve_beta(cfg: DictConfig, slot: BetaSlot, objective: str = "leave_one_out") -> Optional[float]:
    """Replaces ``method_kwargs.<weight>: auto`` by the beta rule's number, in place.

    ``method_kwargs.beta_c`` (c), ``beta_multiview_factor`` and ``beta_rule`` (how the
    number was made, e.g. ``auto: 3.3/256 x 0.5``) are filled in, so args.json and wandb
    show it. Returns the resolved weight, or None when the weight is an explicit number
    (which is only checked).
    """
    kwargs = cfg.method_kwargs
    value = select(cfg, f"method_kwargs.{slot.key}", AUTO)
    if value != AUTO:
        if not is_number(value) or value < 0:
            raise ConfigError(
                f"method_kwargs.{slot.key}={value!r}: the orthogonality weight must be a number >= 0 "
                f"or '{AUTO}' (beta = c / proj_output_dim)"
            )
        return None
    dim, m = select(cfg, "method_kwargs.proj_output_dim"), views_of(cfg).trained
    kwargs.beta_c = select(cfg, "method_kwargs.beta_c", slot.default_c)
    explicit = select(cfg, "method_kwargs.beta_multiview_factor")
    rule = dict(c=kwargs.beta_c, num_views=m, multiview_factor=explicit, objective=objective, loss=slot.loss)
    try:
        beta = beta_rule.beta_for_projector(dim, **rule)
        factor = beta_rule.multiview_factor(slot.loss, objective, m) if explicit is None else explicit
        kwargs.beta_rule = beta_rule.describe_beta(dim, **rule)
    except ValueError as err:
        raise ConfigError(f"cannot resolve method_kwargs.{slot.key}=auto: {err} (method_kwargs)") from err
    kwargs.beta_multiview_factor = float(factor)
    weight = beta
    if slot.relative_to is not None:
        kwargs[slot.relative_to] = select(cfg, f"method_kwargs.{slot.relative_to}", slot.relative_default)
        weight = beta * kwargs[slot.relative_to]
    kwargs[slot.key] = float(weight)
    return float(weight)
