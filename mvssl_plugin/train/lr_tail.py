"""``scheduler.tail_epochs``: the lr decays linearly to zero over a run's last epochs
(:func:`mvssl_plugin.lr_schedule.tail_factor`), on top of solo-learn's ``scheduler.name: none``.

A callback, not a torch scheduler: the lr is a function of the global step alone, so a run
resumed from any checkpoint (its own, or its constant twin's from before the tail, which holds
no scheduler state) takes the right lr without any state to restore.
"""

from __future__ import annotations

from lightning.pytorch.callbacks import Callback

from mvssl_plugin.lr_schedule import tail_factor

#: the key each param group keeps its lr before the tail under (saved with the optimizer's
#: state, so a resume inside the tail scales the same base)
BASE_LR = "tail_base_lr"


class LinearTail(Callback):
    """Before each optimizer step, every param group's lr is its base lr x ``tail_factor``."""

    def __init__(self, tail_epochs: int) -> None:
        self.tail_epochs = int(tail_epochs)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        per_epoch = trainer.num_training_batches // max(1, trainer.accumulate_grad_batches)
        factor = tail_factor(trainer.global_step, trainer.max_epochs * per_epoch, self.tail_epochs * per_epoch)
        for optimizer in trainer.optimizers:
            for group in optimizer.param_groups:
                group.setdefault(BASE_LR, group["lr"])
                group["lr"] = group[BASE_LR] * factor
