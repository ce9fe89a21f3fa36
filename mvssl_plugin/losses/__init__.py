"""Pure-torch losses: no solo-learn, Lightning or Hydra imports below this package."""

from mvssl_plugin.losses.multiview import (
    OBJECTIVES,
    REDUNDANCY_ALIASES,
    REDUNDANCY_MODES,
    canonical_redundancy,
    leave_one_out_means,
    multiview_barlow_loss,
    multiview_vicreg_loss,
    standardize,
)

__all__ = [
    "OBJECTIVES",
    "REDUNDANCY_ALIASES",
    "REDUNDANCY_MODES",
    "canonical_redundancy",
    "leave_one_out_means",
    "multiview_barlow_loss",
    "multiview_vicreg_loss",
    "standardize",
]
