"""Resume, in one place: which checkpoint a launch goes on from, and which it refuses.

- auto-resume (:func:`find_resumable`): among the runs under a logdir that solo-learn's
  AutoResumer would take, the newest complete checkpoint of the run whose whole training config
  matches; a run trained with other settings stops the launch (unless
  ``auto_resume.accept_changes``); a run being trained now stops it; the checkpoints it cannot
  take (a folder without args.json, a run past ``auto_resume.max_hours``, a run of another
  ``max_epochs``) are named, each with how to go on from it, when a new run starts instead;
- an explicit ``resume_from_checkpoint`` (:func:`resume_checkpoint`), checked the same way;
- an evaluation's ``pretrained_feature_extractor`` (:func:`resolve_checkpoint`): a run folder
  becomes its newest complete checkpoint.

Writing checkpoints that survive a kill, and the random stream they carry, stay in
:mod:`mvssl_plugin.train.checkpoints`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from omegaconf import DictConfig, OmegaConf
from solo.utils.auto_resumer import AutoResumer

from mvssl_plugin.config import select
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.files import read_json
from mvssl_plugin.run_lock import describe_holder, lock_holder
from mvssl_plugin.runs import (
    ARGS,
    RUN_LOG,
    checkpoints,
    incomplete_checkpoints,
    is_complete_checkpoint,
    newest_checkpoint,
)

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
    "epoch_knn",
    "hydra",
    "knn_eval",
    "limit_val_batches",
    "log_every_n_steps",
    "memory.cache_dir",
    "memory.prefetch",
    "num_nodes",
    "num_sanity_val_steps",
    "optimizer.kwargs.foreach",  # how Adam's update is computed, not what it computes
    "optimizer.kwargs.fused",
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
    same, changed, skipped, stale_runs, other_length = [], [], [], [], []
    for args_file in Path(logdir).glob(f"*/{ARGS}"):
        run_dir = args_file.parent
        args = DictConfig(read_json(args_file))
        unlike = [k for k in AutoResumer.SHOULD_MATCH if OmegaConf.select(args, k) != OmegaConf.select(cfg, k)]
        if unlike == ["max_epochs"]:  # the same run but for its length: said if a new run starts
            newest = newest_checkpoint(run_dir)
            if newest is not None:
                other_length.append((newest, other_length_notice(run_dir, newest, args.max_epochs, cfg.max_epochs)))
        if unlike:
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
    return Resumable(skipped=skipped, passed_over=orphans + stale_runs + other_length)


def other_length_notice(run_dir: Path, ckpt: Path, trained: Any, asked: Any) -> str:
    """Why a run of another ``max_epochs`` is not continued, and the overrides that continue it."""
    launches = (read_json(run_dir / RUN_LOG) or {}).get("launches", [])
    done = launches[-1].get("epochs_completed") if launches else None
    state = "finished" if launches and launches[-1].get("finished") else f"stopped after {done} epoch(s)"
    return (
        f"a run of these settings with max_epochs={trained} ({state}), not continued: its learning-rate schedule "
        f"and solo-learn's auto-resume depend on max_epochs; to continue it to max_epochs={asked} instead of "
        f"starting anew: +resume_from_checkpoint='{ckpt}' auto_resume.accept_changes=true"
    )


Notify = Callable[[str], None]


def resume_checkpoint(cfg: DictConfig, run_kind: str, notify: Notify = print) -> Tuple[Optional[str], Optional[str]]:
    """solo-learn's explicit or automatic resume: (checkpoint path, wandb run id).

    Automatic resume takes the newest complete checkpoint of a run whose whole training
    config matches (see :func:`find_resumable`), not
    solo-learn's first-listed file of a run matching a few keys; an unreadable checkpoint
    it skips is reported by name. A run trained by another process, or trained with other
    settings (unless ``auto_resume.accept_changes``), stops the launch here, before anything
    of that run is rewritten."""
    accept = bool(select(cfg, "auto_resume.accept_changes", False))
    if cfg.resume_from_checkpoint is not None:
        path = str(cfg.resume_from_checkpoint)
        if not os.path.isfile(path):
            raise ConfigError(f"resume_from_checkpoint={path!r} is not a file")
        if not is_complete_checkpoint(path):
            raise ConfigError(
                f"resume_from_checkpoint={path!r} is not a complete checkpoint (truncated or not a torch "
                "checkpoint): point it at another .ckpt, or drop it to resume from the newest complete one"
            )
        run_dir = Path(path).parent
        holder = lock_holder(run_dir)
        if holder is not None:
            raise ConfigError(describe_holder(run_dir, holder) + ": wait for it to end")
        check_run_readable(run_dir)
        saved = read_json(run_dir / ARGS)
        differences = training_differences(saved, cfg) if saved is not None else []
        if differences and not accept:
            raise refuse_changes(run_dir, differences)
        _say_accepted(differences, run_dir, notify)
        del cfg.resume_from_checkpoint
        return path, None
    if cfg.auto_resume.enabled:
        found = find_resumable(cfg, os.path.join(cfg.checkpoint.dir, run_kind), accept_changes=accept)
        for bad in found.skipped:
            notify(f"skipped unreadable checkpoint {bad} (truncated or not a checkpoint); it is left in place")
        if found.checkpoint is not None:
            _say_accepted(found.differences, found.checkpoint.parent, notify)
            notify(f"resuming from the newest complete checkpoint that matches this config: {found.checkpoint}")
            return str(found.checkpoint), found.wandb_run_id
        for ckpt, why in found.passed_over:
            notify(f"passed over {ckpt}: {why}")
        if found.skipped or found.passed_over:
            notify("no complete checkpoint of a matching run: starting a new run")
    return None, None


def _say_accepted(differences, run_dir, notify: Notify) -> None:
    if differences:
        notify(f"auto_resume.accept_changes=true: {run_dir} goes on with {'; '.join(differences)}")


def resolve_checkpoint(cfg: DictConfig) -> List[str]:
    """``pretrained_feature_extractor``: a run folder becomes its newest complete checkpoint
    (checkpoint names hold ``=``, which Hydra overrides would need quoted). Returns notices
    for unreadable checkpoints skipped."""
    ckpt = select(cfg, "pretrained_feature_extractor")
    notices = []
    if ckpt is not None and not isinstance(ckpt, str):
        ckpt = str(ckpt)
    if ckpt is not None and os.path.isdir(ckpt):
        folder, newest = ckpt, newest_checkpoint(ckpt)
        skipped = [p.name for p in incomplete_checkpoints(folder)]
        if skipped:
            notices.append(f"skipped unreadable checkpoint(s) {skipped} in {folder}")
        if newest is None:
            raise ConfigError(
                f"pretrained_feature_extractor={folder!r} holds no complete .ckpt: point it at a pretraining "
                "run folder (trained_models/<method>/<run id>) or one of its checkpoints"
            )
        cfg.pretrained_feature_extractor = ckpt = str(newest)
    if ckpt is None or not os.path.isfile(ckpt):
        raise ConfigError(
            f"pretrained_feature_extractor={ckpt!r} is not a file: point it at a pretraining checkpoint "
            "(trained_models/<method>/<run>/*.ckpt) or its run folder"
        )
    if not is_complete_checkpoint(ckpt):  # before the data and the backbone are built
        raise ConfigError(
            f"pretrained_feature_extractor={ckpt!r} is not a complete checkpoint (not a torch zip archive, or "
            "truncated): point it at a pretraining run folder or one of its .ckpt files"
        )
    return notices
