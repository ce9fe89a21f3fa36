"""SIGINT (Ctrl-C) and SIGTERM (a scheduler's stop) during training: a resumable checkpoint,
one line, a non-zero exit.

Lightning turns a first Ctrl-C into a "graceful shutdown" after which the script goes on and
exits 0, so ``pretrain && evaluate`` evaluates half a run, and it writes no checkpoint. Here
the first signal only raises a flag; the step under way finishes, every process agrees to
stop after the same step (a collective decision under DDP), the checkpoint is written through
the run's checkpointer, and :func:`mvssl_plugin.train.trainer.fit` raises
:class:`~mvssl_plugin.errors.Interrupted` (exit 130 or 143). A second signal interrupts at
once, as Python's default would.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any, Dict, Optional

from lightning.pytorch.callbacks import Callback

from mvssl_plugin.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class GracefulStop(Callback):
    """Stops training after the step a signal arrives in, with a checkpoint.

    Args:
        checkpointer: the run's :class:`~mvssl_plugin.train.checkpoints.AtomicCheckpointer`
            (None when checkpoints are off: the run stops without one).
        run_log: the :class:`~mvssl_plugin.train.run_log.RunLog` whose launch entry records
            the interruption instead of ``finished``.
    """

    def __init__(self, checkpointer=None, run_log=None) -> None:
        self.checkpointer, self.run_log = checkpointer, run_log
        self.signum: Optional[int] = None
        self.checkpoint: Optional[Path] = None
        self.where = ""
        self._previous: Dict[int, Any] = {}

    def _handle(self, signum: int, frame) -> None:
        if self.signum is not None:  # the second one: now
            raise KeyboardInterrupt
        self.signum = signum

    def on_train_start(self, trainer, pl_module) -> None:
        # after Lightning's own handlers (registered when the run starts), so these replace them
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        stop = self.signum is not None
        if trainer.world_size > 1:
            stop = trainer.strategy.reduce_boolean_decision(stop, all=False)
        if not stop or trainer.should_stop:
            return
        self.signum = self.signum or signal.SIGTERM  # another process got it
        self.where = f"epoch {trainer.current_epoch}, step {trainer.global_step}"
        # the epoch ends early now: its end-of-epoch checkpoint and metrics row would pass
        # the part of an epoch for a whole one, so both are left out and this mid-epoch
        # checkpoint (which Lightning resumes mid-epoch) is written instead
        if self.run_log is not None:
            self.run_log.stopped_by = f"interrupted: {signal.Signals(self.signum).name} at {self.where}"
            self.run_log.stopped_epoch = trainer.current_epoch
        if self.checkpointer is not None and getattr(self.checkpointer, "path", None) is not None:
            self.checkpointer.stopped = True
            name = self.checkpointer.ckpt_placeholder.format(trainer.current_epoch).replace(".ckpt", "-stopped.ckpt")
            self.checkpoint = Path(self.checkpointer.path) / name
            self.checkpointer.save_to(trainer, self.checkpoint)
        trainer.should_stop = True

    def on_train_end(self, trainer, pl_module) -> None:
        self._restore()

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self._restore()

    def outcome(self) -> Optional[Interrupted]:
        """The error to end the launch with, once fitting returned, or None without a signal."""
        if self.signum is None:
            return None
        name = signal.Signals(self.signum).name
        if self.checkpoint is not None:
            text = (
                f"stopped by {name} at {self.where}: resumable checkpoint {self.checkpoint}; "
                "run the same command again to resume"
            )
        elif self.checkpointer is None:
            text = f"stopped by {name} at {self.where or 'once the step ended'}; checkpoints are off: nothing to resume"
        else:
            text = f"stopped by {name} before a checkpoint could be written; the run's last checkpoint is unchanged"
        return Interrupted(text, self.signum)
