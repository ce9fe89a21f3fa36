"""A run folder is never silently changed: relaunches resume only a run trained with the same
settings, a run being trained is locked, signals leave a resumable checkpoint and a non-zero
exit, write errors and corrupt files are one line naming the file. All through main_pretrain.py."""

from __future__ import annotations

import hashlib
import json
import resource
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import assert_one_line, make_image_folder, run_entry, start_entry, tiny_overrides, wait_for

from mvssl_plugin.files import read_csv, read_json
from mvssl_plugin.runs import ARGS, LOCK, METRICS, RUN_LOG, is_complete_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")


def command(data: dict, out: Path, **extra) -> list[str]:
    """A tiny resumable run: auto-resume on, as in the shipped recipes."""
    return ["--config-name", "mabt_cifar.yaml", *tiny_overrides(data, out, **{"auto_resume.enabled": True, **extra})]


def snapshot(folder: Path) -> dict:
    """Every file of a folder with its bytes' hash (and so its name)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def finished(tiny_cifar, tmp_path_factory) -> Path:
    """A finished 1-epoch run under <out>/mabt/<id>; tests copy <out>, never change it."""
    out = tmp_path_factory.mktemp("finished")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        result = run_entry("main_pretrain.py", command(tiny_cifar, out), out)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return out


@pytest.fixture
def run_copy(finished, tmp_path) -> tuple[Path, Path]:
    """(out, run folder) of a fresh copy of the finished run."""
    out = tmp_path / "out"
    shutil.copytree(finished, out)
    (run_dir,) = (out / "mabt").iterdir()
    return out, run_dir


@pytest.mark.slow
@pytest.mark.parametrize(
    "override, key",
    [("method_kwargs.lamb=0.5", "method_kwargs.lamb"), ("method_kwargs.proj_hidden_dim=64", "proj_hidden_dim")],
)
def test_a_relaunch_with_other_settings_stops_and_touches_nothing(override, key, tiny_cifar, run_copy):
    out, run_dir = run_copy
    before = snapshot(run_dir)
    args = command(tiny_cifar, out) + [override]
    line = assert_one_line(run_entry("main_pretrain.py", args, out), 2, str(run_dir), key)
    assert "auto_resume.enabled=false" in line and "auto_resume.accept_changes=true" in line
    assert snapshot(run_dir) == before
    assert [p.name for p in (out / "mabt").iterdir()] == [run_dir.name]  # no new run either


@pytest.mark.slow
def test_accept_changes_continues_that_run_with_the_new_settings(tiny_cifar, run_copy):
    out, run_dir = run_copy
    args = command(tiny_cifar, out, max_epochs=2) + ["method_kwargs.lamb=0.5", "auto_resume.accept_changes=true"]
    # max_epochs is one of solo-learn's own resume keys: a run of 2 epochs is another run...
    result = run_entry("main_pretrain.py", args, out)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(list((out / "mabt").iterdir())) == 2
    # ...so the change is accepted where solo-learn's keys match
    out2 = out.parent / "out2"
    shutil.copytree(out, out2, ignore=shutil.ignore_patterns("offline-*"))
    shutil.copytree(run_dir, out2 / "mabt" / run_dir.name)
    args = command(tiny_cifar, out2) + ["method_kwargs.lamb=0.5", "auto_resume.accept_changes=true"]
    result = run_entry("main_pretrain.py", args, out2)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "goes on with" in result.stdout and "method_kwargs.lamb: 0.18" in result.stdout
    assert "resuming from" in result.stdout
    assert read_json(out2 / "mabt" / run_dir.name / ARGS)["method_kwargs"]["lamb"] == 0.5


@pytest.mark.slow
def test_a_copied_run_goes_on_to_more_epochs_from_its_named_checkpoint(tiny_cifar, run_copy):
    """How a run with a constant lr is lengthened (the CPU claims grid did so: a shorter run is the
    start of a longer one): a copy of the shorter run's folder, whose checkpoint the first launch names,
    accepting max_epochs (solo-learn's auto-resume keys would not match it). The copy trains
    only the epochs past it, leaves the original alone, and later launches auto-resume it."""
    out, run_dir = run_copy
    before = snapshot(run_dir)
    longer = out.parent / "longer"
    copy = longer / "mabt" / run_dir.name
    shutil.copytree(run_dir, copy)
    (ckpt,) = copy.glob("*.ckpt")
    args = command(tiny_cifar, longer, max_epochs=2)
    named = [f"+resume_from_checkpoint='{ckpt}'", "auto_resume.accept_changes=true"]  # quoted: "ep=0" has a "="
    result = run_entry("main_pretrain.py", args + named, longer)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert f"{copy} goes on with max_epochs: 1 -> 2" in result.stdout
    rows = read_csv(copy / METRICS)
    assert [r["epoch"] for r in rows] == ["0", "1"] and float(rows[1]["train_seconds"]) > float(
        rows[0]["train_seconds"]
    )
    assert [p.name.split("-ep=")[1] for p in copy.glob("*.ckpt")] == ["1.ckpt"]
    assert read_json(copy / ARGS)["max_epochs"] == 2 and snapshot(run_dir) == before
    again = run_entry("main_pretrain.py", args, longer)  # no names: auto-resume finds the copy now
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming from the newest complete checkpoint that matches this config: {copy}" in again.stdout


@pytest.mark.slow
def test_a_run_locked_by_a_live_process_is_not_joined_and_a_stale_lock_is_replaced(tiny_cifar, run_copy):
    out, run_dir = run_copy
    before = snapshot(run_dir)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = Path(f"/proc/{holder.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        lock = {"pid": holder.pid, "host": socket.gethostname(), "proc_start": start, "started": "then"}
        (run_dir / LOCK).write_text(json.dumps(lock))
        before = snapshot(run_dir)
        result = run_entry("main_pretrain.py", command(tiny_cifar, out), out)
        assert_one_line(result, 2, f"{run_dir} is being trained by process {holder.pid}", "auto_resume.enabled=false")
        assert snapshot(run_dir) == before
    finally:
        holder.kill()
        holder.wait()
    # the holder is gone: its lock is stale, the relaunch resumes the run and gives the lock back
    result = run_entry("main_pretrain.py", command(tiny_cifar, out), out)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"replaced the stale lock of {run_dir}" in result.stdout and "resuming from" in result.stdout
    assert not (run_dir / LOCK).exists()


@pytest.mark.slow
@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_leaves_a_resumable_checkpoint_and_a_non_zero_exit(signum, status, tmp_path):
    data = {
        "train": str(make_image_folder(tmp_path / "train", per_class=40)),
        "test": str(make_image_folder(tmp_path / "test", per_class=4, seed=1)),
    }
    args = command(data, tmp_path, max_epochs=3)
    run = start_entry("main_pretrain.py", args, tmp_path, capture=True)
    wait_for("mabt/*/*-ep=0.ckpt", tmp_path)
    run.send_signal(signum)
    stdout, stderr = run.communicate(timeout=120)
    result = subprocess.CompletedProcess(run.args, run.returncode, stdout, stderr)
    name = signal.Signals(signum).name
    assert_one_line(result, status, f"stopped by {name} at epoch 1, step", "-stopped.ckpt", "run the same command")
    (run_dir,) = (tmp_path / "mabt").iterdir()
    (stopped,) = run_dir.glob("*.ckpt")  # the epoch-0 one is replaced by it
    assert stopped.name.endswith("ep=1-stopped.ckpt") and is_complete_checkpoint(stopped)
    assert not (run_dir / LOCK).exists()
    (launch,) = read_json(run_dir / RUN_LOG)["launches"]
    assert launch["status"].startswith(f"interrupted: {name}") and launch["epochs_completed"] == 1
    assert [row["epoch"] for row in read_csv(run_dir / METRICS)] == ["0"]  # no row for a part of an epoch

    resumed = run_entry("main_pretrain.py", args, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from the newest complete checkpoint that matches this config: {stopped}" in resumed.stdout
    assert [row["epoch"] for row in read_csv(run_dir / METRICS)] == ["0", "1", "2"]


def test_a_checkpoint_inside_an_epoch_carries_that_epochs_seconds(monkeypatch):
    """A stop mid-epoch saves the clocks up to the signal; the resumed epoch adds only its own
    remaining seconds (times faked: 10 s for epoch 0, stopped 3 s into epoch 1, 5 s after the resume)."""
    from mvssl_plugin.train import run_log

    now = [0.0]
    monkeypatch.setattr(run_log.time, "perf_counter", lambda: now[0])
    clock = run_log.TrainClock()
    clock.on_train_start(None, None)
    clock.on_train_epoch_start(None, None)
    now[0] = 10.0
    clock.on_train_epoch_end(None, None)
    clock.on_train_epoch_start(None, None)
    now[0] = 13.0
    saved = clock.state_dict()
    assert saved == {"train_seconds": 13.0, "wall_seconds": 13.0}

    resumed = run_log.TrainClock()
    resumed.load_state_dict(saved)
    now[0] = 100.0
    resumed.on_train_start(None, None)
    resumed.on_train_epoch_start(None, None)
    now[0] = 105.0
    resumed.on_train_epoch_end(None, None)
    assert (resumed.train_seconds, resumed.wall_seconds) == (18.0, 18.0)
    assert resumed.state_dict() == {"train_seconds": 18.0, "wall_seconds": 18.0}  # at an epoch boundary


def _file_size_limit(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.slow
def test_a_failed_checkpoint_write_names_the_path_and_errno(tiny_cifar, tmp_path):
    # 256 KiB: room for args.json, metrics.csv and run.json, not for the checkpoint (~1.5 MB)
    args = command(tiny_cifar, tmp_path)
    result = run_entry("main_pretrain.py", args, tmp_path, preexec_fn=_file_size_limit(256 * 1024))
    (run_dir,) = (tmp_path / "mabt").iterdir()
    line = assert_one_line(result, 5, f"could not write {run_dir}/", "-ep=0.ckpt", "(EFBIG)")
    assert line.startswith("mvssl write error: ")
    assert not list(run_dir.glob("*.part")) and not list(run_dir.glob("*.ckpt"))
    assert read_json(run_dir / ARGS)["method"] == "mabt"  # earlier files intact and readable


@pytest.mark.slow
@pytest.mark.parametrize("broken", [ARGS, RUN_LOG])
def test_a_corrupt_run_file_is_one_line_naming_it(broken, tiny_cifar, run_copy):
    out, run_dir = run_copy
    path = run_dir / broken
    path.write_text(path.read_text()[:40])
    before = snapshot(run_dir)
    assert_one_line(run_entry("main_pretrain.py", command(tiny_cifar, out), out), 2, str(path), "not readable JSON")
    assert snapshot(run_dir) == before
    if broken == ARGS:
        knn = ["--pretrained_checkpoint_dir", str(run_dir), "--dataset", "cifar10", "--num_workers", "0"]
        knn += ["--train_data_path", tiny_cifar["train"], "--val_data_path", tiny_cifar["test"]]
        assert_one_line(run_entry("main_knn.py", knn, out), 2, str(path), "not readable JSON")
