"""The lr's linear tail to zero (:func:`mvssl_plugin.lr_tail_factor.tail_factor`), on top of
solo-learn's ``scheduler.name: none``: over a run's last epochs (``scheduler.tail_epochs``), or
over the last minutes of its time budget (``scheduler.tail_minutes`` with
``epoch_knn.stop_after_minutes``).

A callback, not a torch scheduler: the lr is a function of the global step, or of the training
clock, which checkpoints carry; so a run resumed from any checkpoint (its own, or its constant
twin's from before the tail, which holds no scheduler state) takes the right lr without any state
to restore. Counted in minutes, the tail ends where the budget does whatever this machine's step
time, so a slower machine still trains its last minutes at a small lr; the epoch that crosses the
budget (the run stops after it) trains its remainder at zero.
"""

from __future__ import annotations

from typing import Optional, Tuple

from lightning.pytorch.callbacks import Callback

from mvssl_plugin.lr_tail_factor import tail_factor
from mvssl_plugin.train.run_log import TrainClock

#: the key each param group keeps its lr before the tail under (saved with the optimizer's
#: state, so a resume inside the tail scales the same base)
BASE_LR = "tail_base_lr"


class LinearTail(Callback):
    """Before each optimizer step, every param group's lr is its base lr x ``tail_factor``.

    ``tail_epochs``: the run's last epochs, counted in optimizer steps. ``tail_minutes`` and
    ``budget_minutes``: the last minutes of a time budget, counted on ``clock`` (the run's
    :class:`TrainClock`: evaluation time is off it)."""

    def __init__(
        self,
        tail_epochs: int = 0,
        tail_minutes: float = 0.0,
        budget_minutes: Optional[float] = None,
        clock: Optional[TrainClock] = None,
    ) -> None:
        if bool(tail_epochs) == bool(tail_minutes) or (tail_minutes and (budget_minutes is None or clock is None)):
            raise ValueError("give tail_epochs, or tail_minutes with budget_minutes and the run's clock")
        self.tail_epochs, self.tail_minutes, self.budget_minutes = int(tail_epochs), tail_minutes, budget_minutes
        self.steps = (1, 0)  # (the run's optimizer steps, the tail's), set when training starts
        self.clock = clock

    def on_train_start(self, trainer, pl_module) -> None:
        # Lightning's count of the run's optimizer steps (gradient accumulation included), as
        # solo-learn's own schedulers take it; every epoch has as many
        total = int(trainer.estimated_stepping_batches)
        self.steps = (total, total * self.tail_epochs // trainer.max_epochs)

    def position(self, trainer) -> Tuple[float, float, float]:
        """``tail_factor``'s (now, end, tail): in optimizer steps, or in training seconds."""
        if not self.tail_minutes:
            return (trainer.global_step, *self.steps)
        return self.clock.train_now(), 60.0 * self.budget_minutes, 60.0 * self.tail_minutes  # type: ignore[union-attr,operator]

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        factor = tail_factor(*self.position(trainer))
        for optimizer in trainer.optimizers:
            for group in optimizer.param_groups:
                group.setdefault(BASE_LR, group["lr"])
                group["lr"] = group[BASE_LR] * factor
