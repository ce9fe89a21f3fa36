"""The progress lines of a run logged to a file: Lightning's progress bar as whole lines
(:class:`LogProgress`), where a terminal gets tqdm's bars."""

from __future__ import annotations

import math
from typing import Optional

from lightning.pytorch.callbacks import ProgressBar

from mvssl_plugin.progress import LineProgress


class LogProgress(ProgressBar):
    """Lightning's progress bar for a log file (stdout not a terminal): lines as
    :class:`~mvssl_plugin.progress.LineProgress` spaces them, ``mvssl: epoch 3, training step 120/390 (31%), 42 s``,
    instead of tqdm's carriage-return redraws. Global rank 0 only."""

    def __init__(self) -> None:
        super().__init__()
        self._enabled = True
        self._train: Optional[LineProgress] = None
        self._val: Optional[LineProgress] = None
        self._val_done = 0

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def _lines(self, trainer, stage: str, total) -> LineProgress:
        steps = int(total) if total is not None and math.isfinite(total) else None
        return LineProgress(f"mvssl: epoch {trainer.current_epoch}, {stage}", steps)

    def _say(self, trainer, lines: Optional[LineProgress], done: int) -> None:
        line = lines.update(done) if lines is not None else None
        if line is not None and self._enabled and trainer.is_global_zero:
            print(line, flush=True)

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._train = self._lines(trainer, "training step", self.total_train_batches)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._say(trainer, self._train, batch_idx + 1)

    def on_validation_start(self, trainer, pl_module) -> None:
        self._val, self._val_done = self._lines(trainer, "validation batch", self.total_val_batches), 0

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        if not trainer.sanity_checking:
            self._val_done += 1
            self._say(trainer, self._val, self._val_done)
