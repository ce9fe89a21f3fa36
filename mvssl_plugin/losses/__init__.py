"""Pure-torch losses: no solo-learn, Lightning or Hydra imports below this package."""

from mvssl_plugin.losses.multiview import (
    leave_one_out_means,
    multiview_barlow_loss,
    multiview_vicreg_loss,
    standardize,
)

__all__ = [
    "leave_one_out_means",
    "multiview_barlow_loss",
    "multiview_vicreg_loss",
    "standardize",
]
