"""The losses, pure torch: no solo-learn, Lightning or Hydra imports in this package.

``objectives`` (the Barlow Twins / VICReg family's vocabulary: objectives, redundancy modes,
default scales) is standard library only and loads with the package, so the beta rule and
the config checks read it without importing torch; the torch losses load on first use.

* :func:`multiview_barlow_loss`, :func:`multiview_vicreg_loss` (``multiview``): the family.
* :func:`mmcr_loss` (``mmcr``): maximum manifold capacity representations.
* :data:`Views`, :func:`stack_views` (``stacking``): the input every loss takes, checked once.
* :func:`hardest_subsets`, :func:`gather_views` (``hard_views``): each image's hardest views.
* ``distributed``: the autograd-aware cross-process reductions they share.
"""

from __future__ import annotations

import importlib
from typing import Any

from mvssl_plugin.losses.objectives import (
    LOSS_SCALE,
    METHOD_SCALE,
    OBJECTIVES,
    REDUNDANCY_ALIASES,
    REDUNDANCY_MODES,
    canonical_redundancy,
    check_objective,
    check_pair,
)

#: the torch members, by the module that holds them (imported on first access)
_TORCH_MEMBERS = {
    "Views": "stacking",
    "stack_views": "stacking",
    "hardest_subsets": "hard_views",
    "gather_views": "hard_views",
    "leave_one_out_means": "multiview",
    "multiview_barlow_loss": "multiview",
    "multiview_vicreg_loss": "multiview",
    "standardize": "multiview",
    "mmcr_loss": "mmcr",
}

__all__ = [
    "LOSS_SCALE",
    "METHOD_SCALE",
    "OBJECTIVES",
    "REDUNDANCY_ALIASES",
    "REDUNDANCY_MODES",
    "canonical_redundancy",
    "check_objective",
    "check_pair",
    *_TORCH_MEMBERS,
]


def __getattr__(name: str) -> Any:
    if name in _TORCH_MEMBERS:
        return getattr(importlib.import_module(f"{__name__}.{_TORCH_MEMBERS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
