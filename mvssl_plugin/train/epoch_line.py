"""The epoch line: each epoch's metrics printed as one line, ``mvssl: epoch 3 train_loss=...``
(:class:`EpochSummary`, always on)."""

from __future__ import annotations

from typing import Optional

from lightning.pytorch.callbacks import Callback


class EpochSummary(Callback):
    """Prints each epoch's metrics, which Lightning shows nowhere without a logger.

    Hooks are chosen to run after Lightning has reduced the epoch's values: validation
    at ``on_validation_end``, training at the next epoch's start and at the end of fit,
    and only for epochs this process trained (a resumed run has no values for the epoch
    it resumed after).
    """

    def __init__(self) -> None:
        self._trained_epoch: Optional[int] = None

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            self._print(trainer, "val", trainer.current_epoch)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self._trained_epoch = trainer.current_epoch

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        if self._trained_epoch is not None and self._trained_epoch == trainer.current_epoch - 1:
            self._print(trainer, "train", self._trained_epoch)

    def on_train_end(self, trainer, pl_module) -> None:
        if self._trained_epoch is not None:
            self._print(trainer, "train", self._trained_epoch)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        """Closes the progress bars now, so they are not redrawn at interpreter exit,
        after everything else the run printed."""
        bar = trainer.progress_bar_callback
        for name in ("_train_progress_bar", "_val_progress_bar", "_test_progress_bar", "_predict_progress_bar"):
            tqdm_bar = getattr(bar, name, None)
            if tqdm_bar is not None:
                tqdm_bar.close()

    @staticmethod
    def _print(trainer, prefix: str, epoch: int) -> None:
        metrics = {
            k.removesuffix("_epoch"): float(v)
            for k, v in trainer.callback_metrics.items()
            if k.startswith(prefix) and not k.endswith("_step") and v.numel() == 1
        }
        if metrics and trainer.is_global_zero:
            text = " ".join(f"{k}={v:.4g}" for k, v in sorted(metrics.items()))
            line = f"mvssl: epoch {epoch} {text}"
            bar = trainer.progress_bar_callback
            bar.print(line) if bar is not None else print(line, flush=True)  # keeps tqdm's bars intact
