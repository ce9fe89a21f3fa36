"""The run lock (mvssl_plugin/run_lock.py) on its own: a lock taken on another host is live while
its holder refreshes it and stale after, and the holder's heartbeat refreshes it until released.
A lock held by a live process on this host, through main_pretrain.py: tests/test_runs.py."""

from __future__ import annotations

import json
import os
import time

import pytest

from mvssl_plugin import run_lock
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.runs import LOCK


def test_a_lock_from_another_host_is_live_while_refreshed_and_stale_after(tmp_path):
    """A node lost or a job killed with SIGKILL and requeued elsewhere leaves its lock: this host
    cannot see that process, so the lock's age (its holder refreshes it) decides."""
    lock = tmp_path / LOCK
    lock.write_text(json.dumps({"pid": 12345, "host": "gpu-node-17", "started": "then"}))
    with pytest.raises(ConfigError, match=r"by process 12345 on gpu-node-17 .*auto_resume.enabled=false"):
        run_lock.take_lock(tmp_path)  # refreshed just now: live
    old = time.time() - run_lock.LOCK_STALE_SECONDS - 60
    os.utime(lock, (old, old))
    try:
        notice = run_lock.take_lock(tmp_path)
        assert notice == f"replaced the stale lock of {tmp_path} (taken on gpu-node-17, not refreshed for 11 min)"
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    finally:
        run_lock.release_lock(tmp_path)
    assert not lock.exists()


def test_the_holder_refreshes_its_lock_until_it_gives_it_back(tmp_path, monkeypatch):
    monkeypatch.setattr(run_lock, "LOCK_HEARTBEAT_SECONDS", 0.05)
    run_lock.take_lock(tmp_path)
    lock = tmp_path / LOCK
    try:
        old = time.time() - 3600
        os.utime(lock, (old, old))
        deadline = time.time() + 10
        while lock.stat().st_mtime < time.time() - 60 and time.time() < deadline:
            time.sleep(0.05)
        assert lock.stat().st_mtime > time.time() - 60, "the heartbeat did not refresh the lock"
    finally:
        run_lock.release_lock(tmp_path)
    assert not lock.exists() and not run_lock._heartbeats
