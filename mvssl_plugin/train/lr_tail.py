"""``scheduler.tail_epochs``: the lr decays linearly to zero over a run's last epochs
(:func:`mvssl_plugin.lr_tail_factor.tail_factor`), on top of solo-learn's ``scheduler.name: none``.

A callback, not a torch scheduler: the lr is a function of the global step alone, so a run
resumed from any checkpoint (its own, or its constant twin's from before the tail, which holds
no scheduler state) takes the right lr without any state to restore.
"""

from __future__ import annotations

from lightning.pytorch.callbacks import Callback

from mvssl_plugin.lr_tail_factor import tail_factor

#: the key each param group keeps its lr before the tail under (saved with the optimizer's
#: state, so a resume inside the tail scales the same base)
BASE_LR = "tail_base_lr"


class LinearTail(Callback):
    """Before each optimizer step, every param group's lr is its base lr x ``tail_factor``."""

    def __init__(self, tail_epochs: int) -> None:
        self.tail_epochs = int(tail_epochs)
        self.steps = (1, 0)  # (the run's optimizer steps, the tail's), set when training starts

    def on_train_start(self, trainer, pl_module) -> None:
        # Lightning's count of the run's optimizer steps (gradient accumulation included), as
        # solo-learn's own schedulers take it; every epoch has as many
        total = int(trainer.estimated_stepping_batches)
        self.steps = (total, total * self.tail_epochs // trainer.max_epochs)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        factor = tail_factor(trainer.global_step, *self.steps)
        for optimizer in trainer.optimizers:
            for group in optimizer.param_groups:
                group.setdefault(BASE_LR, group["lr"])
                group["lr"] = group[BASE_LR] * factor
