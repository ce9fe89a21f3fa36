"""Stops a run whose training loss is not finite: every method the entry point runs, and the
plugin's methods under solo-learn's own scripts (``MultiViewMethod.configure_callbacks``).

On a CPU the plugin's methods also read their loss before the optimizer step (``methods/base.py``);
solo-learn's own (``barlow_twins``, ``vicreg``, ...) do not, and a diverged run would otherwise
train on for every remaining epoch on NaN weights and checkpoint them. This callback keeps "every
loss so far was finite" as a flag on the loss's device and reads it back every ``every`` steps
(``performance.finite_check_every``: every step on a CPU, where the read-back is free; every 100 on
a GPU, where it would make the host wait) and at each epoch's end, before the epoch's checkpoint,
ending the run with the same one line and exit status 3. With ``every > 1`` it is the step's only
read-back of the loss."""

from __future__ import annotations

from typing import Any, Mapping, Optional

import torch
from lightning.pytorch import Callback


class FiniteLoss(Callback):
    """Raises ``FloatingPointError`` (the entry points' exit 3) at the first read-back after a
    non-finite loss; the loss's value where it reads back every step."""

    def __init__(self, every: int = 1):
        self.every = every
        self.finite: Optional[torch.Tensor] = None  # on the device: every loss since the last read-back
        self.since = 0  # the first step since the last read-back

    def on_train_batch_end(self, trainer, pl_module, outputs: Any, batch: Any, batch_idx: int) -> None:
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if not isinstance(loss, torch.Tensor):
            return
        finite = torch.isfinite(loss.detach()).all()
        if self.every == 1:  # the value is in host memory (a CPU): read it, and say it
            if not bool(finite):
                where = f"at epoch {trainer.current_epoch}, step {trainer.global_step}"
                self.stop(pl_module, f"is {loss.detach().float().item()} {where}")
            return
        self.finite = finite if self.finite is None else self.finite & finite
        if trainer.global_step % self.every == 0:
            self.read_back(trainer, pl_module)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.read_back(trainer, pl_module)

    def read_back(self, trainer, pl_module) -> None:
        """One device-to-host copy: whether every loss since the last one was finite."""
        if self.finite is not None and not bool(self.finite):
            where = f"at a step from {self.since} to {trainer.global_step} (epoch {trainer.current_epoch})"
            self.stop(pl_module, f"was not finite {where}")
        self.finite, self.since = None, trainer.global_step + 1

    @staticmethod
    def stop(pl_module, what: str) -> None:
        raise FloatingPointError(
            f"the training loss of {type(pl_module).__name__} {what}: training stopped, and checkpoints already "
            "written are kept (none of this epoch). Lower optimizer.lr, check the data normalization, or train "
            "with precision=32."
        )
