"""Checkpoints that survive being killed, and resuming from the newest complete one.

solo-learn's Checkpointer writes ``<run>/<name>-<version>-ep=N.ckpt`` straight to its final
name, so a kill during the write leaves a truncated file that its AutoResumer may pick
(it takes the first ``.ckpt`` a folder lists), and every resumed offline run starts a new
folder. Here a checkpoint is written to ``*.ckpt.part`` and renamed into place (atomic on
POSIX), resuming takes the newest readable checkpoint of the newest matching run, the
resumed run keeps writing to that run's folder and continues the saved random stream, so
one run folder holds one curve.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from solo.utils.auto_resumer import AutoResumer
from solo.utils.checkpointer import Checkpointer

from mvssl_plugin.errors import ConfigError
from mvssl_plugin.runs import (
    ARGS,
    PARTIAL_SUFFIX,
    RUN_LOG,
    atomic_write_text,
    checkpoints,
    describe_holder,
    is_complete_checkpoint,
    lock_holder,
    newest_checkpoint,
    read_json,
    release_lock,
    take_lock,
    writing,
)

RNG_KEY = "mvssl_rng_states"


def rng_states() -> dict:
    """Python, NumPy and torch (CPU and CUDA) random states of this process."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    numpy_state = (name, keys.tolist(), int(pos), int(has_gauss), float(cached))  # plain types: weights_only loads
    states = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict) -> None:
    random.setstate(states["python"])
    name, keys, pos, has_gauss, cached = states["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


class AtomicCheckpointer(Checkpointer):
    """solo-learn's Checkpointer (same layout, args.json, frequency, keep_prev) with atomic
    writes, continuing in the folder of ``resume_from`` when the run resumes."""

    def __init__(self, cfg: DictConfig, logdir, frequency: int = 1, keep_prev: bool = False, resume_from=None):
        super().__init__(cfg, logdir=logdir, frequency=frequency, keep_prev=keep_prev)
        self.resume_from = Path(resume_from) if resume_from is not None else None

    def setup(self, trainer, pl_module, stage: str) -> None:
        """The run folder, its lock and args.json now, before the sanity check (solo-learn
        makes them at the training start), so the start block and run.json can name the
        folder. The lock is taken before args.json is written: a run trained by another
        process is not touched."""
        if getattr(self, "path", None) is None:
            self.initial_setup(trainer)
            if trainer.world_size > 1:
                # solo-learn draws a new run's id in every process; rank 0's folder is the run's,
                # so every process names it (a stop's message on rank 1 named a folder never made)
                self.path, self.ckpt_placeholder = trainer.strategy.broadcast((self.path, self.ckpt_placeholder))
            if trainer.is_global_zero:
                notice = take_lock(self.path)
                self.locked = True
                if notice:
                    print(f"mvssl: {notice}", flush=True)
            self.save_args(trainer)

    def release(self) -> None:
        """Gives the run's lock back (called when fitting ends, however it ends)."""
        if getattr(self, "locked", False):
            release_lock(self.path)
            self.locked = False

    def save_args(self, trainer) -> None:
        """solo-learn's args.json, written atomically and with write errors named."""
        if trainer.is_global_zero:
            args = OmegaConf.to_container(self.cfg)
            args["wandb_run_id"] = getattr(self, "wandb_run_id", None)
            atomic_write_text(self.path / ARGS, json.dumps(args, default=lambda o: "<not serializable>"))

    def on_train_start(self, trainer, _) -> None:
        """Done in :meth:`setup`."""

    def initial_setup(self, trainer) -> None:
        if self.resume_from is None or trainer.logger is not None:  # wandb runs keep their id
            return super().initial_setup(trainer)
        self.path = self.resume_from.parent
        self.ckpt_placeholder = f"{self.cfg.name}-{self.path.name}" + "-ep={}.ckpt"
        self.last_ckpt = self.resume_from  # replaced by the next save unless keep_prev

    def save(self, trainer) -> None:
        if trainer.sanity_checking or getattr(self, "stopped", False):  # stopped mid-epoch: see train/signals.py
            return
        self.save_to(trainer, self.path / self.ckpt_placeholder.format(trainer.current_epoch))

    def save_to(self, trainer, final: Path) -> None:
        """Writes the checkpoint to ``final`` through a ``.part`` file; the previous one is
        removed only once the new one is complete (unless keep_prev)."""
        partial = final.with_name(final.name + PARTIAL_SUFFIX)
        with writing(final, partial):
            trainer.save_checkpoint(partial)  # collective under DDP; rank 0 writes
            if trainer.is_global_zero:
                os.replace(partial, final)
        if trainer.is_global_zero:
            previous = self.last_ckpt
            if previous and Path(previous) != final and not self.keep_prev and os.path.exists(previous):
                os.remove(previous)
        trainer.strategy.barrier()
        self.last_ckpt = final

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        checkpoint[RNG_KEY] = rng_states()

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        """Continues the random stream where the checkpoint left it.

        Without this a resumed run re-seeds and replays the shuffles and augmentations of
        its first epochs: a model that has seen those exact views before shows a loss that
        drops at every resume (measured: 17.7, then 12.4, then 8.8 on the replayed epoch,
        against about 18 uninterrupted). With it, a run on a CPU continues exactly.
        """
        self._pending_rng = checkpoint.get(RNG_KEY)

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        # applied here, after the sanity check's loaders have drawn their seeds and before
        # the epoch's loader draws its own, as in the uninterrupted run
        if getattr(self, "_pending_rng", None) is not None:
            set_rng_states(self._pending_rng)
            self._pending_rng = None


#: keys that change neither the model, the data nor the optimization: where and how a run
#: is logged, evaluated and checkpointed, and how fast it runs. Every other key of a run's
#: args.json must match for a relaunch to resume it (unknown keys count: a false "differs"
#: asks the user, a false "same" would mix two trainings in one folder).
RUN_NEUTRAL_KEYS = (
    "accelerator",
    "auto_resume",
    "check_val_every_n_epoch",
    "checkpoint",
    "dali.num_threads",
    "data.num_workers",
    "data.val_fraction",
    "data.val_path",
    "devices",  # compared as the number of processes, below
    "effective_rank",
    "enable_progress_bar",
    "hydra",
    "knn_eval",
    "limit_val_batches",
    "log_every_n_steps",
    "memory.cache_dir",
    "num_nodes",
    "num_sanity_val_steps",
    "performance",
    "resume_from_checkpoint",
    "run_summary",
    "strategy",
    "strict_keys",
    "time_to_accuracy",
    "wandb",
    "wandb_run_id",
)


def _flat(node: Any, prefix: str = "") -> Dict[str, Any]:
    """Dotted keys of a nested config (list items by index) with their leaf values."""
    if isinstance(node, dict):
        items = node.items()
    elif isinstance(node, list) and any(isinstance(v, (dict, list)) for v in node):
        items = ((str(i), v) for i, v in enumerate(node))
    else:
        return {prefix: node}
    out: Dict[str, Any] = {}
    for key, value in items:
        out.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _training_keys(cfg: Any) -> Dict[str, Any]:
    plain = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    devices = plain.get("devices", 1)
    flat = {k: v for k, v in _flat(plain).items() if not any(k == n or k.startswith(n + ".") for n in RUN_NEUTRAL_KEYS)}
    per_node = devices if isinstance(devices, int) else len(devices or [0])
    flat["processes"] = per_node * int(plain.get("num_nodes") or 1)
    return flat


def training_differences(saved: Any, cfg: Any) -> List[str]:
    """``key: saved -> now`` for every training key (all but :data:`RUN_NEUTRAL_KEYS`) on
    which a run's saved config and ``cfg`` differ, sorted."""
    old, new = _training_keys(saved), _training_keys(cfg)
    missing = object()
    return [
        f"{key}: {old.get(key, 'unset')} -> {new.get(key, 'unset')}"
        for key in sorted(set(old) | set(new))
        if old.get(key, missing) != new.get(key, missing)
    ]


def check_run_readable(run_dir: Path) -> None:
    """Reads the run's args.json and run.json once: a corrupt one stops the launch here,
    naming the file, before anything of the run is rewritten."""
    read_json(run_dir / ARGS)
    read_json(run_dir / RUN_LOG)


def refuse_changes(run_dir: Path, differences: List[str]) -> ConfigError:
    shown = "; ".join(differences[:6]) + (f"; and {len(differences) - 6} more" if len(differences) > 6 else "")
    return ConfigError(
        f"{run_dir} was trained with other settings ({shown}); nothing was changed. Start a new run with "
        "auto_resume.enabled=false (or another name=...), or continue that run with these settings with "
        "auto_resume.accept_changes=true"
    )


@dataclass
class Resumable:
    """What auto-resume found under a logdir."""

    checkpoint: Optional[Path] = None
    wandb_run_id: Optional[str] = None
    differences: List[str] = field(default_factory=list)  # of the chosen run, accepted
    skipped: List[Path] = field(default_factory=list)  # unreadable checkpoints of matching runs
    # complete checkpoints auto-resume may not take, with why: said when a new run starts instead
    passed_over: List[Tuple[Path, str]] = field(default_factory=list)


def find_resumable(cfg: DictConfig, logdir: str, accept_changes: bool = False) -> Resumable:
    """The run a relaunch continues: among the runs under ``logdir`` that solo-learn's
    AutoResumer would take (its keys match, a checkpoint younger than ``auto_resume.max_hours``),
    the one with the newest complete checkpoint whose training config matches ``cfg`` on every
    key (:func:`training_differences`). When none is found, ``passed_over`` names the complete
    checkpoints it could not take (a folder without args.json; a run older than the window),
    so that the new run it starts is not a silent surprise.

    Raises:
        ConfigError: when such a run is being trained now (its lock is live); when the runs
            that solo-learn would resume all differ, naming the keys of the newest one, unless
            ``accept_changes``; when a run's args.json or run.json is corrupt.
    """
    max_hours = cfg.auto_resume.max_hours
    oldest_allowed = datetime.now() - timedelta(hours=max_hours)
    same, changed, skipped, stale_runs = [], [], [], []
    for args_file in Path(logdir).glob(f"*/{ARGS}"):
        run_dir = args_file.parent
        args = DictConfig(read_json(args_file))
        if any(OmegaConf.select(args, k) != OmegaConf.select(cfg, k) for k in AutoResumer.SHOULD_MATCH):
            continue
        differences = training_differences(args, cfg)
        holder = lock_holder(run_dir)
        if holder is not None and not differences:
            raise ConfigError(
                describe_holder(run_dir, holder) + " with this same config: a second launch would write into "
                "it; wait for it to end, or start a new run with auto_resume.enabled=false"
            )
        complete, stale = [], []
        for ckpt in checkpoints(run_dir):
            if datetime.fromtimestamp(ckpt.stat().st_mtime) < oldest_allowed:
                stale.append(ckpt)
                continue
            (complete if is_complete_checkpoint(ckpt) else skipped).append(ckpt)
        stale = [c for c in stale if is_complete_checkpoint(c)]
        if stale and not complete:
            hours = (datetime.now() - datetime.fromtimestamp(stale[-1].stat().st_mtime)).total_seconds() / 3600
            why = f"written {hours:.0f} h ago, more than auto_resume.max_hours={max_hours}: raise it to go on from it"
            stale_runs.append((stale[-1], why))
        if complete:
            check_run_readable(run_dir)
            newest = complete[-1]
            entry = (newest.stat().st_mtime, newest, args.get("wandb_run_id"), differences, holder)
            (changed if differences else same).append(entry)
    if same:
        _, ckpt, run_id, _, _ = max(same, key=lambda e: e[0])
        return Resumable(ckpt, run_id, [], skipped)
    if changed:
        _, ckpt, run_id, differences, holder = max(changed, key=lambda e: e[0])
        if holder is not None:
            raise ConfigError(describe_holder(ckpt.parent, holder) + ": start a new run with auto_resume.enabled=false")
        if not accept_changes:
            raise refuse_changes(ckpt.parent, differences)
        return Resumable(ckpt, run_id, differences, skipped)
    orphans = [
        (
            ckpt,
            f"no {ARGS} beside it, so its settings are unknown; to go on from it, name it: "
            f"+resume_from_checkpoint='{ckpt}'",
        )
        for ckpt in (newest_checkpoint(d) for d in sorted(Path(logdir).glob("*/")) if not (d / ARGS).is_file())
        if ckpt is not None
    ]
    return Resumable(skipped=skipped, passed_over=orphans + stale_runs)
