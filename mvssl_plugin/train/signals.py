"""SIGINT (Ctrl-C), SIGTERM (a scheduler's stop) and SLURM's warning signal during training:
a resumable checkpoint, one line, a non-zero exit.

Lightning turns a first Ctrl-C into a "graceful shutdown" after which the script goes on and
exits 0, so ``pretrain && evaluate`` evaluates half a run, and it writes no checkpoint. Here
the first signal only raises a flag; the step under way finishes, every process agrees to
stop after the same step (a collective decision under DDP), the checkpoint is written through
the run's checkpointer, and :func:`mvssl_plugin.train.trainer.fit` raises
:class:`~mvssl_plugin.errors.Interrupted` (exit 130, 143, or 138 for SIGUSR1). A second
SIGINT interrupts at once, as Python's default would; a repeated SIGTERM or SIGUSR1 is the
same stop, since SLURM sends SIGTERM twice at a time limit, and again to every task when one
task exits or the job requeues itself, with its SIGKILL ``KillWait`` seconds later.

Under SLURM, SIGUSR1 is the warning ``#SBATCH --signal=USR1@120`` sends before the time limit
(Lightning's convention). This handler replaces Lightning's auto-requeue (switched off in
:func:`mvssl_plugin.train.trainer.build_trainer`): after the checkpoint, once the run lock is
released, rank 0 runs ``scontrol requeue`` and the job's next start resumes the run in its
folder (docs/slurm.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from lightning.pytorch.callbacks import Callback

from mvssl_plugin.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: SLURM's warning before the time limit (``#SBATCH --signal=USR1@<seconds>``): stop, then requeue
REQUEUE_SIGNAL = signal.SIGUSR1


def slurm_job_id(environ: Mapping[str, str] = os.environ) -> Optional[str]:
    """The id ``scontrol requeue`` takes for this SLURM job (``<array job>_<task>`` for a task
    of a job array, whose own id would requeue the whole array); None outside SLURM."""
    if environ.get("SLURM_ARRAY_JOB_ID") and environ.get("SLURM_ARRAY_TASK_ID"):
        return f"{environ['SLURM_ARRAY_JOB_ID']}_{environ['SLURM_ARRAY_TASK_ID']}"
    return environ.get("SLURM_JOB_ID") or None


def requeue_job(job_id: str) -> str:
    """Runs ``scontrol requeue job_id``; returns the sentence saying what happened."""
    try:
        done = subprocess.run(["scontrol", "requeue", job_id], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        reason = str(err)
    else:
        if done.returncode == 0:
            return f"SLURM job {job_id} requeued: it resumes from this checkpoint when it starts again"
        reason = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
    return f"could not requeue SLURM job {job_id} ({reason}): submit the same job again to resume"


def count_batch_as_completed(checkpoint: dict) -> None:
    """Marks the batch under way as completed in a checkpoint written from its
    ``on_train_batch_end``: Lightning counts a batch as completed only after those hooks, so
    a resume from such a checkpoint runs the batch again (measured under SLURM: epoch 1 ended
    at step 37 where an uninterrupted run ends it at 36) though its optimizer and step-wise
    learning-rate steps are already in the checkpoint."""
    loop = checkpoint["loops"]["fit_loop"]
    progress = loop["epoch_loop.batch_progress"]
    for part in ("total", "current"):
        progress[part]["completed"] = progress[part]["processed"]
    loop["epoch_loop.state_dict"]["_batches_that_stepped"] += 1  # Lightning adds it after the hooks too


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
        self.global_zero = True
        self._saving = False
        self._previous: Dict[int, Any] = {}

    def _handle(self, signum: int, frame) -> None:
        if self.signum is None:
            self.signum = signum
        elif signum == signal.SIGINT:  # a second Ctrl-C: now
            raise KeyboardInterrupt
        # a repeated SIGTERM / SIGUSR1 is the scheduler's, for the stop already under way

    @staticmethod
    def handled_signals() -> tuple:
        """SIGINT and SIGTERM; SIGUSR1 too in a SLURM job."""
        return SIGNALS + ((REQUEUE_SIGNAL,) if slurm_job_id() else ())

    def on_train_start(self, trainer, pl_module) -> None:
        # after Lightning's own handlers (registered when the run starts), so these replace them
        if threading.current_thread() is threading.main_thread():
            for signum in self.handled_signals():
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
        warned = self.signum == REQUEUE_SIGNAL
        if trainer.world_size > 1:  # SLURM signals every task, not at the same instant: a step may part them
            warned = trainer.strategy.reduce_boolean_decision(warned, all=False)
        self.signum = REQUEUE_SIGNAL if warned else self.signum or signal.SIGTERM  # or another process got it
        self.global_zero = trainer.is_global_zero
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
            self._saving = True
            try:
                self.checkpointer.save_to(trainer, self.checkpoint)
            finally:
                self._saving = False
        trainer.should_stop = True

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        if self._saving:  # the stopped checkpoint, written from inside on_train_batch_end
            count_batch_as_completed(checkpoint)

    def on_train_end(self, trainer, pl_module) -> None:
        self._restore()

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self._restore()

    def hold_off(self) -> None:
        """After a stop, ignores SIGTERM and SIGUSR1 until the process exits: the handlers
        Lightning restores when fitting ends would let SLURM's repeated SIGTERM cut the last
        writes (run.json, the lock's release, the requeue). No-op without a stop."""
        if self.signum is not None and threading.current_thread() is threading.main_thread():
            for signum in self.handled_signals():
                if signum == signal.SIGINT:  # a second Ctrl-C still interrupts
                    continue
                signal.signal(signum, signal.SIG_IGN)

    def outcome(self) -> Optional[Interrupted]:
        """The error to end the launch with, once fitting returned and the run lock was
        released, or None without a signal. After SLURM's warning signal, rank 0 requeues the
        job here (the requeued job's launch then finds the lock free)."""
        if self.signum is None:
            return None
        name = signal.Signals(self.signum).name
        job_id = slurm_job_id() if self.signum == REQUEUE_SIGNAL else None
        if self.checkpoint is not None and job_id is not None:
            then = requeue_job(job_id) if self.global_zero else f"rank 0 requeues SLURM job {job_id}"
            text = f"stopped by {name} at {self.where}: resumable checkpoint {self.checkpoint}; {then}"
        elif self.checkpoint is not None:
            text = (
                f"stopped by {name} at {self.where}: resumable checkpoint {self.checkpoint}; "
                "run the same command again to resume"
            )
        elif self.checkpointer is None:
            text = f"stopped by {name} at {self.where or 'once the step ended'}; checkpoints are off: nothing to resume"
        else:
            text = f"stopped by {name} before a checkpoint could be written; the run's last checkpoint is unchanged"
        return Interrupted(text, self.signum)
