"""Stops a run whose training loss is not finite, for every method the entry point runs.

The plugin's methods check their loss before the optimizer step (``methods/base.py``); solo-learn's
own (``barlow_twins``, ``vicreg``, ...) do not, and a diverged run would otherwise train on for every
remaining epoch on NaN weights and checkpoint them. This callback ends it after the step whose loss
is NaN or infinite, before the epoch's checkpoint, with the same one line and exit status 3."""

from __future__ import annotations

from typing import Any, Mapping

import torch
from lightning.pytorch import Callback


class FiniteLoss(Callback):
    """Raises ``FloatingPointError`` (the entry points' exit 3) at the first non-finite loss."""

    def on_train_batch_end(self, trainer, pl_module, outputs: Any, batch: Any, batch_idx: int) -> None:
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if isinstance(loss, torch.Tensor) and not bool(torch.isfinite(loss.detach()).all()):
            raise FloatingPointError(
                f"the training loss of {type(pl_module).__name__} is {loss.detach().float().item()} at epoch "
                f"{trainer.current_epoch}, step {trainer.global_step}: training stopped, and checkpoints already "
                "written are kept (none of this epoch). Lower optimizer.lr, check the data normalization, or "
                "train with precision=32."
            )
