"""The run lock: one process trains a run folder at a time.

The process training a run holds ``run.lock`` in its folder (:data:`~mvssl_plugin.runs.LOCK`):
its pid, host and start, written at once or not at all. A second launch on the same run stops
with one line naming the holder; a lock whose holder is gone is stale and replaced. A daemon
thread refreshes the lock (its heartbeat), so a lock taken on another host, whose process this
host cannot see, ages out once that process is gone. Standard library only.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from mvssl_plugin.errors import ConfigError
from mvssl_plugin.files import atomic_write_text, writing
from mvssl_plugin.runs import LOCK

#: the holder refreshes its lock file's modification time this often (a daemon thread), so a
#: lock taken on another host, whose process this host cannot see, ages out once that process
#: is gone (a node lost, a job killed with SIGKILL and requeued elsewhere)
LOCK_HEARTBEAT_SECONDS = 60.0
#: a lock from another host not refreshed for this long is stale (ten heartbeats: room for
#: a busy file system and for clock skew between hosts)
LOCK_STALE_SECONDS = 600.0


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
