"""The run's own record, kept by Lightning callbacks while it trains.

- :class:`RunLog` (always on with checkpoints): ``metrics.csv`` in the run folder, one row
  per epoch with every logged scalar, the training and wall-clock seconds, and the time the
  training loop waited on data; ``run.json`` with the command and device.
- :class:`TimeToAccuracy` (``time_to_accuracy``): the epoch and seconds at which online
  accuracies first pass given targets -> ``time_to_accuracy.csv`` and wandb. It measures
  nothing of the model: it reads the accuracies the method logs off the run's clock.

"Training seconds" exclude validation and the sanity check, so methods are compared on
what they spend learning; all clocks are saved in checkpoints and continue after a resume.
The evaluation computed during training (effective rank) is in
:mod:`mvssl_plugin.eval.effective_rank`; the printed lines in :mod:`mvssl_plugin.train.start_block`,
:mod:`mvssl_plugin.train.epoch_line` and :mod:`mvssl_plugin.train.lightning_progress`.
"""

from __future__ import annotations

import os
import platform
import resource
import shlex
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Optional

import torch
from lightning.pytorch.callbacks import Callback

from mvssl_plugin import provenance
from mvssl_plugin.files import read_csv, read_json, write_csv, write_json
from mvssl_plugin.runs import METRICS, RUN_LOG, TIME_TO_ACCURACY
from mvssl_plugin.train.signals import slurm_job_id


def run_folder(trainer) -> Optional[Path]:
    """The solo-learn run folder (where checkpoints and args.json go), if checkpointing."""
    # local: solo-learn (all of it: seconds) loads when a run folder is looked up; train.start_block and
    # train.epoch_knn import this module without it
    from solo.utils.checkpointer import Checkpointer

    for callback in trainer.callbacks:
        if isinstance(callback, Checkpointer) and getattr(callback, "path", None) is not None:
            return Path(callback.path)
    return None


class TrainClock(Callback):
    """Training seconds (epochs minus their validation) and wall-clock seconds of a run,
    carried over resumes through the checkpoint."""

    def __init__(self) -> None:
        self.train_seconds = 0.0  # completed epochs
        self.wall_seconds = 0.0  # until the last checkpointed epoch end
        self._fit_start = self._epoch_start = self._val_start = self._epoch_stop = None
        self._val_in_epoch = 0.0
        self._wall_offset = 0.0

    def on_train_start(self, trainer, pl_module) -> None:
        self._fit_start = time.perf_counter()
        self._wall_offset = self.wall_seconds

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._epoch_start, self._val_in_epoch, self._epoch_stop = time.perf_counter(), 0.0, None

    def on_validation_start(self, trainer, pl_module) -> None:
        self._val_start = time.perf_counter()

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking and self._val_start is not None and self._epoch_start is not None:
            self._val_in_epoch += time.perf_counter() - self._val_start
        self._val_start = None  # no validation running: train_now counts up to now

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.train_seconds += self._until() - self._epoch_start - self._val_in_epoch
        self.wall_seconds = self.wall_now()
        self._epoch_start = None

    def stop_at(self, moment: float) -> None:
        """Ends the running epoch's training at ``moment`` (a ``time.perf_counter()`` reading):
        what follows until the epoch's end (an evaluation after every epoch) is not training.
        Called before this clock's own epoch end."""
        if self._epoch_start is not None:
            self._epoch_stop = moment

    def _until(self) -> float:
        return self._epoch_stop if self._epoch_stop is not None else time.perf_counter()

    def wall_now(self) -> float:
        return self._wall_offset + (time.perf_counter() - self._fit_start if self._fit_start is not None else 0.0)

    def train_now(self) -> float:
        """Training seconds up to the running validation's start (or now): ``_val_in_epoch``
        holds only the validations that have ended, so none is subtracted twice."""
        if self._epoch_start is None:
            return self.train_seconds
        until = self._val_start if self._val_start is not None else self._until()
        return self.train_seconds + until - self._epoch_start - self._val_in_epoch

    def state_dict(self) -> dict:
        """The clocks up to now: a checkpoint written inside an epoch (a stop by signal, or
        one saved before this callback's epoch end) carries that epoch's seconds so far, and
        a resume continues from them."""
        if self._epoch_start is None:
            return {"train_seconds": self.train_seconds, "wall_seconds": self.wall_seconds}
        return {"train_seconds": self.train_now(), "wall_seconds": self.wall_now()}

    def load_state_dict(self, state: dict) -> None:
        self.train_seconds = float(state.get("train_seconds", 0.0))
        self.wall_seconds = float(state.get("wall_seconds", 0.0))


def scalar_metrics(trainer) -> Dict[str, float]:
    """The epoch's scalar metrics (Lightning's ``*_step``/``*_epoch`` twins left out)."""
    out = {}
    for name, value in trainer.callback_metrics.items():
        if name.endswith(("_step", "_epoch")):
            continue
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            out[name] = round(float(value), 6)
        elif isinstance(value, (int, float)):
            out[name] = value
    return out


CONFIG_FLAGS = ("--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd")


def config_options(argv: Sequence[str]) -> List[str]:
    """Hydra's config-location options of a command line, each with its value."""
    kept, i = [], 0
    while i < len(argv):
        arg = argv[i]
        if arg in CONFIG_FLAGS and i + 1 < len(argv):
            kept += [arg, argv[i + 1]]
            i += 1
        elif arg.startswith(tuple(f + "=" for f in CONFIG_FLAGS)):
            kept.append(arg)
        i += 1
    return kept


def command_line() -> str:
    """The command that runs this job alone: under a Hydra multirun, the sweep command is
    replaced by the recipe options and this job's own overrides."""
    argv = list(sys.argv)
    try:
        # local: Hydra is only there once a Hydra job runs (compose_recipe's configs train without one),
        # as in config.views
        from hydra.core.hydra_config import HydraConfig

        hydra_cfg = HydraConfig.get()
        if hydra_cfg.mode.name == "MULTIRUN":
            argv = [argv[0], *config_options(argv[1:]), *hydra_cfg.overrides.task]
    except (ImportError, ValueError):
        pass
    return " ".join(shlex.quote(a) for a in ["python", *argv])


def slurm_job() -> Dict[str, object]:
    """The SLURM job a launch ran in and how many times it had been requeued (a requeued job
    keeps its id), so run.json tells a job's restarts from new submissions; empty outside SLURM."""
    job = slurm_job_id()
    if job is None:
        return {}
    return {"slurm_job": job, "slurm_restarts": int(os.environ.get("SLURM_RESTART_COUNT") or 0)}


def peak_memory_mib(trainer) -> float:
    """The launch's peak memory so far, MiB: on a GPU the tensors allocated on its device (the
    figure an out-of-memory error is about), on a CPU the process's peak resident set."""
    if trainer.accelerator.__class__.__name__ == "CUDAAccelerator":
        return round(torch.cuda.max_memory_allocated(trainer.strategy.root_device) / 2**20, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux: KiB


def device_description(trainer) -> str:
    if trainer.accelerator.__class__.__name__ == "CUDAAccelerator":
        return f"{trainer.num_devices} x {torch.cuda.get_device_name(trainer.strategy.root_device)}"
    cpu = platform.processor() or platform.machine()
    return f"{trainer.num_devices} process(es) on {os.cpu_count()} CPU cores ({cpu})"


class RunLog(TrainClock):
    """``metrics.csv`` beside the checkpoints: epoch, step, seconds, every logged scalar;
    and ``run.json``: the command, device, versions and clocks, one entry per launch,
    written when the launch starts and brought up to date at every epoch and at the end,
    so a killed launch is listed too (``status: running`` forever).

    Rows are written at each epoch's end, before that epoch's checkpoint (Lightning has
    reduced the epoch's metrics by then); after a resume, rows of re-run epochs replace
    the old ones."""

    def __init__(self) -> None:
        super().__init__()
        self._data_wait, self._last_batch_end = 0.0, None
        self._launch: Optional[int] = None
        self.stopped_by: Optional[str] = None  # set by train/signals.py's GracefulStop
        self.stopped_epoch: Optional[int] = None  # the epoch it stopped in (not completed)

    # Data wait: from a step's end (or the epoch's start, loader start-up included) to the
    # next batch on the device. Host-side: on a GPU, kernels still queued overlap it, so it
    # bounds the time the GPU waits on data from above.
    def on_train_epoch_start(self, trainer, pl_module) -> None:
        super().on_train_epoch_start(trainer, pl_module)
        self._data_wait, self._last_batch_end = 0.0, time.perf_counter()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self._last_batch_end is not None:
            self._data_wait += time.perf_counter() - self._last_batch_end

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._last_batch_end = time.perf_counter()

    def on_validation_start(self, trainer, pl_module) -> None:
        super().on_validation_start(trainer, pl_module)
        self._last_batch_end = None

    def on_fit_start(self, trainer, pl_module) -> None:
        self._write_launch(trainer, "running")

    def on_train_end(self, trainer, pl_module) -> None:
        self._write_launch(trainer, self.stopped_by or "finished", epochs_completed=self.stopped_epoch)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self._write_launch(trainer, f"failed: {type(exception).__name__}")

    def _write_launch(self, trainer, status: str, epochs_completed: Optional[int] = None) -> None:
        folder = run_folder(trainer)
        if folder is None or not trainer.is_global_zero or not folder.is_dir():
            return
        path = folder / RUN_LOG
        launches = read_json(path, {"launches": []})["launches"]
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        if self._launch is None or self._launch >= len(launches):
            launches.append({"command": command_line(), "cwd": os.getcwd(), "started": now, **slurm_job()})
            self._launch = len(launches) - 1
        launches[self._launch].update(
            {
                "device": device_description(trainer),
                "torch": torch.__version__,
                "plugin_version": provenance.version(),
                "plugin_commit": provenance.commit(),
                "updated": now,
                "status": status,
                "finished": status == "finished",
                "epochs_completed": (
                    trainer.fit_loop.epoch_progress.current.completed if epochs_completed is None else epochs_completed
                ),
                "train_seconds": round(self.train_seconds, 2),
                "wall_seconds": round(self.wall_now(), 2),
            }
        )
        write_json(path, {"launches": launches})

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if self.stopped_by is not None:  # a part of an epoch: no row (train/signals.py)
            return
        epoch_start, until = self._epoch_start, self._until()
        super().on_train_epoch_end(trainer, pl_module)
        epoch_seconds = until - epoch_start - self._val_in_epoch if epoch_start else 0.0
        metrics = scalar_metrics(trainer)  # on every process: reducing synced metrics is collective
        folder = run_folder(trainer)
        if folder is None or not trainer.is_global_zero:
            return
        path = folder / METRICS
        row = {
            "epoch": trainer.current_epoch,
            "step": trainer.global_step,
            "train_seconds": round(self.train_seconds, 3),
            "wall_seconds": round(self.wall_seconds, 3),
            "data_wait_seconds": round(self._data_wait, 3),
            "data_wait_fraction": round(self._data_wait / epoch_seconds, 4) if epoch_seconds > 0 else "",
            "peak_memory_mib": peak_memory_mib(trainer),
            **metrics,
        }
        rows = [r for r in read_csv(path) if int(r["epoch"]) < trainer.current_epoch]
        write_csv(path, rows + [row])
        # Lightning counts the epoch as completed only after this hook: this one is done
        self._write_launch(trainer, "running", epochs_completed=trainer.current_epoch + 1)


class TimeToAccuracy(Callback):
    """Epoch, training and wall-clock seconds at which each metric first reaches each target,
    read off the run's clock (the :class:`RunLog`, which saves it in checkpoints)."""

    def __init__(self, metrics: Sequence[str], targets: Sequence[float], clock: TrainClock) -> None:
        self.metrics, self.targets = list(metrics), sorted(float(t) for t in targets)
        self.clock = clock
        self.reached: List[Dict[str, object]] = []

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking:
            return
        values = scalar_metrics(trainer)
        done = {(r["metric"], r["target"]) for r in self.reached}
        new = []
        for metric in self.metrics:
            for target in self.targets:
                if metric in values and values[metric] >= target and (metric, target) not in done:
                    new.append(
                        {
                            "metric": metric,
                            "target": target,
                            "epoch": trainer.current_epoch,
                            "train_seconds": round(self.clock.train_now(), 3),
                            "wall_seconds": round(self.clock.wall_now(), 3),
                            "value": values[metric],
                        }
                    )
        if not new:
            return
        self.reached += new
        for row in new:
            print(
                f"mvssl: {row['metric']} reached {row['target']:g} at epoch {row['epoch']} "
                f"after {row['train_seconds']:.1f} training seconds",
                flush=True,
            )
        if trainer.logger is not None:
            trainer.logger.log_metrics(
                {f"time_to_{r['metric']}_{r['target']:g}_seconds": r["train_seconds"] for r in new},
                step=trainer.global_step,
            )
        folder = run_folder(trainer)
        if folder is not None and trainer.is_global_zero:
            write_csv(folder / TIME_TO_ACCURACY, self.reached)

    def state_dict(self) -> dict:
        return {"reached": self.reached}

    def load_state_dict(self, state: dict) -> None:
        self.reached = list(state.get("reached", []))
