"""Pure-torch losses: no solo-learn, Lightning or Hydra imports below this package."""

from mvssl_plugin.losses.multiview import (
    REDUNDANCY_MODES,
    leave_one_out_means,
    multiview_barlow_loss,
    multiview_vicreg_loss,
    standardize,
)

__all__ = [
    "REDUNDANCY_MODES",
    "leave_one_out_means",
    "multiview_barlow_loss",
    "multiview_vicreg_loss",
    "standardize",
]
