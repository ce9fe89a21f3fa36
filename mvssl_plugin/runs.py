"""The run folder: what a run writes, under which name, and how it is read back.

A run folder is solo-learn's ``<checkpoint.dir>/<method>/<run id>/``. Every module that
writes or reads one (the training callbacks, the evaluations, ``compare``, the
benchmarks) takes its file names and its I/O from here, so a name changes in one place.
Standard library only: writes are atomic (a ``.part`` file renamed into place, atomic on
POSIX), so a run killed mid-write leaves the previous complete file, never half of one.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import socket
import threading
import time
import zipfile
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from mvssl_plugin.errors import ConfigError, WriteError

ARGS = "args.json"  # the resolved config (solo-learn's Checkpointer writes it)
METRICS = "metrics.csv"  # one row per epoch: clocks and every logged scalar
RUN_LOG = "run.json"  # one entry per launch: command, device, clocks
TIME_TO_ACCURACY = "time_to_accuracy.csv"
KNN = "knn.csv"  # offline kNN grid (main_knn.py)
EPOCH_KNN = "epoch_knn.csv"  # the kNN after every epoch (epoch_knn), beside the training clock
PROBE = "probe.json"  # fast linear probe (main_linear.py with a probe recipe)
LOCK = "run.lock"  # held by the process training the run (see take_lock)
#: the holder refreshes its lock file's modification time this often (a daemon thread), so a
#: lock taken on another host, whose process this host cannot see, ages out once that process
#: is gone (a node lost, a job killed with SIGKILL and requeued elsewhere)
LOCK_HEARTBEAT_SECONDS = 60.0
#: a lock from another host not refreshed for this long is stale (ten heartbeats: room for
#: a busy file system and for clock skew between hosts)
LOCK_STALE_SECONDS = 600.0
CHECKPOINT_GLOB = "*.ckpt"
PARTIAL_SUFFIX = ".part"


def write_error(path: str | Path, err: OSError) -> WriteError:
    """One line naming the file and the errno (``ENOSPC``, ``EFBIG``...) of a failed write."""
    code = errno.errorcode.get(err.errno, str(err.errno)) if err.errno else "no errno"
    reason = err.strerror or str(err)
    return WriteError(f"could not write {path}: {reason} ({code}); the files written before it are intact")


def check_writable_folder(path: str | Path, setting: str) -> None:
    """That ``path`` is a folder this process may write into, or one it can create: checked
    before any work, so that a run does not end in a traceback at its first write (solo-learn's
    checkpointer after the model is built, a checkpoint after an epoch). Creates nothing.

    Raises:
        ConfigError: one line naming ``setting`` (what the user sets: ``checkpoint.dir=...``,
            ``--out ...``) and the part of ``path`` in the way.
    """
    target = Path(os.path.abspath(path))
    existing = target
    while not existing.exists() and existing.parent != existing:  # below a file, exists() is False
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{setting}: {existing} is a file, so no folder can be made there; choose another folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        verb = "is" if existing == target else f"cannot be created: {existing} is"
        raise ConfigError(
            f"{setting}: {target} {verb} not writable (permissions or a read-only disk); choose another folder"
        )


@contextmanager
def writing(path: str | Path, partial: Optional[str | Path] = None) -> Iterator[None]:
    """Turns an OSError raised while writing ``path`` into a :class:`WriteError` naming it,
    removing the half-written ``partial`` file so that only complete files are left."""
    try:
        yield
    except OSError as err:
        if partial is not None:
            try:
                os.remove(partial)
            except OSError:
                pass
        raise write_error(path, err) from err


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Writes ``text`` to ``path`` through a temporary file renamed into place."""
    path = Path(path)
    partial = path.with_name(path.name + PARTIAL_SUFFIX)
    with writing(path, partial):
        partial.write_text(text)
        os.replace(partial, path)
    return path


def write_json(path: str | Path, data: Any) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=2))


def read_json(path: str | Path, default: Any = None) -> Any:
    """The JSON at ``path``, or ``default`` when the file is missing.

    Raises:
        ConfigError: naming the file, when it is not valid JSON (truncated, edited).
    """
    path = Path(path)
    if not path.is_file():
        return default
    try:
        return json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise ConfigError(
            f"{path} is not readable JSON ({err}): it was cut short or edited; restore it or remove the run folder"
        ) from err


# ------------------------------------------------------------------------------ the lock


def _process_start(pid: int) -> Optional[str]:
    """The start time of process ``pid`` in clock ticks since boot (Linux), to tell a live
    holder from a later process given the same pid; None where /proc cannot say."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lock_age(path: Path) -> Optional[float]:
    """Seconds since the lock file was last refreshed; None when it is gone."""
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return None


def _examine_lock(path: Path) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """(holder, None) for a live holder; (None, why) for a stale lock; (None, None) for none.

    On this host a lock is stale when its process is gone or its pid now names another
    process; a lock taken on another host, whose process this host cannot see, when its
    holder has not refreshed it for :data:`LOCK_STALE_SECONDS`."""
    try:
        holder = json.loads(path.read_text())
        pid = int(holder["pid"])
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError, KeyError, TypeError):
        return None, "it was half written"  # by a process killed while taking it
    host = holder.get("host")
    if host != socket.gethostname():
        age = _lock_age(path)
        if age is not None and age > LOCK_STALE_SECONDS:
            return None, f"taken on {host}, not refreshed for {age / 60:.0f} min"
        return holder, None
    if not _alive(pid) or (holder.get("proc_start") not in (None, _process_start(pid))):
        return None, "its process is gone"
    return holder, None


def lock_holder(run_dir: str | Path) -> Optional[Dict[str, Any]]:
    """Who holds the run's lock: the lock's content for a live holder; None when there is no
    lock or it is stale (see :func:`_examine_lock`)."""
    return _examine_lock(Path(run_dir) / LOCK)[0]


class _Heartbeat(threading.Thread):
    """Touches the lock file every :data:`LOCK_HEARTBEAT_SECONDS` until stopped (or the process ends)."""

    def __init__(self, path: Path) -> None:
        super().__init__(name=f"mvssl-lock-heartbeat {path}", daemon=True)
        self.path, self.stopped = path, threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(LOCK_HEARTBEAT_SECONDS):
            try:
                os.utime(self.path)
            except OSError:
                pass  # the lock is gone or unreachable for a moment: the next beat tries again


_heartbeats: Dict[Path, _Heartbeat] = {}


def _start_heartbeat(path: Path) -> None:
    _stop_heartbeat(path)
    beat = _heartbeats[path] = _Heartbeat(path)
    beat.start()


def _stop_heartbeat(path: Path) -> None:
    beat = _heartbeats.pop(path, None)
    if beat is not None:
        beat.stopped.set()


def describe_holder(run_dir: str | Path, holder: Dict[str, Any]) -> str:
    return (
        f"{run_dir} is being trained by process {holder.get('pid')} on {holder.get('host')} since "
        f"{holder.get('started')} (lock file {Path(run_dir) / LOCK})"
    )


def take_lock(run_dir: str | Path) -> Optional[str]:
    """Locks ``run_dir`` for this process. Returns a notice when a stale lock was replaced.

    Raises:
        ConfigError: when a live process holds it.
    """
    path = Path(run_dir) / LOCK
    pid = os.getpid()
    record = json.dumps(
        {
            "pid": pid,
            "host": socket.gethostname(),
            "proc_start": _process_start(pid),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
    )
    with writing(path):
        try:
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # one of two racing launches wins
        except FileExistsError:
            holder, reason = _examine_lock(path)
            if holder is not None and holder.get("pid") != pid:
                raise ConfigError(
                    describe_holder(run_dir, holder) + ": wait for it to end, or start a new run with "
                    "auto_resume.enabled=false; delete the lock file only if no process trains that run"
                ) from None
            atomic_write_text(path, record)
            _start_heartbeat(path)
            return None if reason is None else f"replaced the stale lock of {run_dir} ({reason})"
        with os.fdopen(handle, "w") as lock:
            lock.write(record)
    _start_heartbeat(path)
    return None


def release_lock(run_dir: str | Path) -> None:
    """Removes this process's lock of ``run_dir`` (another process's is left alone)."""
    path = Path(run_dir) / LOCK
    _stop_heartbeat(path)
    try:
        if int(json.loads(path.read_text())["pid"]) == os.getpid():
            path.unlink()
    except (OSError, ValueError, KeyError, TypeError):
        pass


def write_csv(path: str | Path, rows: List[Dict[str, object]]) -> Path:
    """Writes rows (columns: every key, in first-seen order) atomically."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    return atomic_write_text(path, buffer.getvalue())


def read_csv(path: str | Path) -> List[Dict[str, str]]:
    """Rows of a CSV file; none when it is missing."""
    path = Path(path)
    if not path.is_file():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


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
