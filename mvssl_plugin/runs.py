"""The run folder: what a run writes there, under which name, and how it is found again.

A run folder is solo-learn's ``<checkpoint.dir>/<method>/<run id>/``. Every module that
writes or reads one (the training callbacks, the evaluations, ``compare``, the
benchmarks) takes its file names from here, so a name changes in one place; its
checkpoints are listed and checked here, and run folders found under a root. Writing the
files: :mod:`mvssl_plugin.files`; the lock: :mod:`mvssl_plugin.run_lock`. Standard library only.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import List, Optional, Tuple

from mvssl_plugin.errors import ConfigError

ARGS = "args.json"  # the resolved config (solo-learn's Checkpointer writes it)
METRICS = "metrics.csv"  # one row per epoch: clocks and every logged scalar
RUN_LOG = "run.json"  # one entry per launch: command, device, clocks
TIME_TO_ACCURACY = "time_to_accuracy.csv"
KNN = "knn.csv"  # offline kNN grid (main_knn.py)
EPOCH_KNN = "epoch_knn.csv"  # the kNN after every epoch (epoch_knn), beside the training clock
PROBE = "probe.json"  # fast linear probe (main_linear.py with a probe recipe)
LOCK = "run.lock"  # held by the process training the run (see mvssl_plugin.run_lock)
CHECKPOINT_GLOB = "*.ckpt"


def is_complete_checkpoint(path: str | Path) -> bool:
    """A torch checkpoint is a zip archive whose directory sits at its end: a truncated
    file has none. Cheap: reads the directory, not the tensors."""
    try:
        with zipfile.ZipFile(path) as archive:
            return len(archive.namelist()) > 0
    except (zipfile.BadZipFile, OSError):
        return False


def checkpoints(run_dir: str | Path) -> List[Path]:
    """Every ``*.ckpt`` of a run folder, complete or not, oldest first."""
    return sorted(Path(run_dir).glob(CHECKPOINT_GLOB), key=lambda p: p.stat().st_mtime)


def newest_checkpoint(run_dir: str | Path) -> Optional[Path]:
    """The most recently written complete checkpoint of a run folder, or None."""
    complete = [p for p in checkpoints(run_dir) if is_complete_checkpoint(p)]
    return complete[-1] if complete else None


def incomplete_checkpoints(run_dir: str | Path) -> List[Path]:
    """The ``*.ckpt`` files of a run folder that cannot be read (truncated, not a checkpoint)."""
    return [p for p in checkpoints(run_dir) if not is_complete_checkpoint(p)]


def run_files(path: str | Path) -> Tuple[Path, Path]:
    """(args.json, checkpoint) of a run folder (its newest complete checkpoint) or of a ``.ckpt``.

    Raises:
        ConfigError: naming the path, when it is missing, not a checkpoint, or a folder
            without a complete checkpoint or without args.json.
    """
    path = Path(path)
    if path.is_file():
        if not is_complete_checkpoint(path):
            raise ConfigError(
                f"{str(path)!r} is not a complete checkpoint (not a torch zip archive, or truncated): "
                "point at a pretraining run folder or one of its .ckpt files"
            )
        ckpt, folder = path, path.parent
    elif path.is_dir():
        ckpt, folder = newest_checkpoint(path), path
        if ckpt is None:
            broken = [p.name for p in incomplete_checkpoints(path)]
            detail = f" (unreadable: {broken})" if broken else ""
            raise ConfigError(
                f"{str(path)!r} holds no complete .ckpt{detail}: point at a pretraining run folder "
                "(trained_models/<method>/<run id>)"
            )
    else:
        raise ConfigError(f"{str(path)!r} does not exist: point at a pretraining run folder or its .ckpt")
    args = folder / ARGS
    if not args.is_file():
        raise ConfigError(f"{str(folder)!r} has no {ARGS}: point at a run folder written by main_pretrain.py")
    return args, ckpt


def is_run_folder(path: str | Path) -> bool:
    """A folder holding a run's args.json and metrics.csv (what ``compare`` reads)."""
    path = Path(path)
    return (path / ARGS).is_file() and (path / METRICS).is_file()


def find_run_folders(root: str | Path) -> List[Path]:
    """``root`` itself if it is a run folder, else every run folder below it, sorted."""
    root = Path(root)
    if is_run_folder(root):
        return [root]
    return sorted(p.parent for p in root.rglob(METRICS) if is_run_folder(p.parent))
