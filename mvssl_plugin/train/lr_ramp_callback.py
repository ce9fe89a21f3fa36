"""The constant lr's ramps (:mod:`mvssl_plugin.lr_ramps`) on top of solo-learn's
``scheduler.name: none``: a linear warm-up over the first minutes of the run's training clock
(``scheduler.warmup_minutes``), and a linear tail to zero over its last epochs
(``scheduler.tail_epochs``) or over the last minutes of its time budget
(``scheduler.tail_minutes`` with ``epoch_knn.stop_after_minutes``), that tail repeated in every
cycle of ``scheduler.cycle_minutes`` of the budget.

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

from mvssl_plugin.lr_ramps import cycle_position, tail_factor, warmup_factor
from mvssl_plugin.train.run_log import TrainClock

#: the key each param group keeps its constant lr under (saved with the optimizer's state, so a
#: resume inside a ramp scales the same base; named for the tail, the first ramp, as checkpoints
#: written since carry it)
BASE_LR = "tail_base_lr"


class LrRamps(Callback):
    """Before each optimizer step, every param group's lr is its base lr x ``warmup_factor`` x
    ``tail_factor``.

    ``warmup_minutes``: the first minutes of training, counted on ``clock`` (the run's
    :class:`TrainClock`: evaluation time is off it). ``tail_epochs``: the run's last epochs,
    counted in optimizer steps. ``tail_minutes`` and ``budget_minutes``: the last minutes of a
    time budget, counted on ``clock``; with ``cycle_minutes``, the last ``tail_minutes`` of each
    cycle of that length (the budget a whole number of them)."""

    def __init__(
        self,
        tail_epochs: int = 0,
        tail_minutes: float = 0.0,
        budget_minutes: Optional[float] = None,
        clock: Optional[TrainClock] = None,
        warmup_minutes: float = 0.0,
        cycle_minutes: float = 0.0,
    ) -> None:
        if tail_epochs and tail_minutes:
            raise ValueError("give tail_epochs or tail_minutes, not both")
        if (tail_minutes and budget_minutes is None) or ((tail_minutes or warmup_minutes) and clock is None):
            raise ValueError("tail_minutes needs budget_minutes, and minutes need the run's clock")
        if not (tail_epochs or tail_minutes or warmup_minutes):
            raise ValueError("give a warm-up or a tail: warmup_minutes, tail_epochs or tail_minutes")
        self.tail_epochs, self.tail_minutes, self.budget_minutes = int(tail_epochs), tail_minutes, budget_minutes
        self.warmup_minutes = warmup_minutes
        if cycle_minutes and not tail_minutes:
            raise ValueError("cycle_minutes repeats the tail: give tail_minutes and budget_minutes")
        if cycle_minutes and tail_minutes > cycle_minutes:
            raise ValueError(f"tail_minutes={tail_minutes} must fit in a cycle of cycle_minutes={cycle_minutes}")
        if cycle_minutes:  # the budget a whole number of cycles
            cycle_position(0.0, float(budget_minutes), cycle_minutes)  # type: ignore[arg-type]
        self.cycle_minutes = cycle_minutes
        self.steps = (1, 0)  # (the run's optimizer steps, the tail's), set when training starts
        self.clock = clock

    def on_train_start(self, trainer, pl_module) -> None:
        # Lightning's count of the run's optimizer steps (gradient accumulation included), as
        # solo-learn's own schedulers take it; every epoch has as many
        total = int(trainer.estimated_stepping_batches)
        self.steps = (total, total * self.tail_epochs // trainer.max_epochs)

    def tail_position(self, trainer) -> Tuple[float, float, float]:
        """``tail_factor``'s (now, end, tail): in optimizer steps, or in training seconds."""
        if not self.tail_minutes:
            return (trainer.global_step, *self.steps)
        now, end = cycle_position(self.clock.train_now(), 60.0 * self.budget_minutes, 60.0 * self.cycle_minutes)  # type: ignore[union-attr,operator]
        return now, end, 60.0 * self.tail_minutes

    def factor(self, trainer) -> float:
        """The lr's multiplier for the coming step."""
        up = warmup_factor(self.clock.train_now(), 60.0 * self.warmup_minutes) if self.warmup_minutes else 1.0  # type: ignore[union-attr]
        return up * tail_factor(*self.tail_position(trainer))

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        factor = self.factor(trainer)
        for optimizer in trainer.optimizers:
            for group in optimizer.param_groups:
                group.setdefault(BASE_LR, group["lr"])
                group["lr"] = group[BASE_LR] * factor
