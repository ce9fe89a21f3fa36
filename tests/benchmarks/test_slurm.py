"""The sbatch template on a real SLURM: a one-node cluster on loopback (scripts/slurm_local.sh),
``sbatch benchmarks/slurm/pretrain.sbatch`` with two tasks (two CPU processes, DDP through
srun), and the four ways a job is interrupted on a shared cluster: ``scontrol requeue``, the
warning of ``--signal`` before the time limit, ``scancel``, the time limit itself. Each ends
with a stopped checkpoint that the job's next start (requeued, or submitted again) resumes in
the same run folder, its clocks continued. Skipped, saying why, where SLURM cannot start.
The pieces without a cluster (signal handling, Lightning's SLURM options) are tested at the end.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from helpers import REPO, make_image_folder

from mvssl_plugin.files import read_csv, read_json
from mvssl_plugin.runs import ARGS, METRICS, RUN_LOG

TEMPLATE = REPO / "benchmarks" / "slurm" / "pretrain.sbatch"
CLUSTER_SCRIPT = REPO / "scripts" / "slurm_local.sh"
TOOLS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "scancel")
PER_CLASS = 96  # 3 classes: 288 images, 2 processes x batch 8 -> 18 steps per epoch per process
STEPS = 3 * PER_CLASS // 2 // 8
#: the shrunk CPU recipe (the template sets data paths, workers, devices, nodes, checkpoint.dir)
OVERRIDES = {
    "data.num_workers": 0,
    "backbone.name": "narrow_resnet18",
    "backbone.kwargs.width": 8,
    "method_kwargs.proj_output_dim": 16,
    "optimizer.batch_size": 8,
    "data.fraction": -1,
    "data.val_fraction": -1,
    "++enable_progress_bar": "false",
}


def missing_slurm() -> Optional[str]:
    """Why a one-node cluster cannot start here, or None."""
    missing = [t for t in TOOLS if shutil.which(t) is None and not os.access(f"/usr/sbin/{t}", os.X_OK)]
    if missing:
        return (
            f"SLURM is not installed ({', '.join(missing)} missing): `make test` installs it where "
            "apt-get exists and it may (scripts/install.sh, WITH_SLURM=1)"
        )
    if os.geteuid() != 0:
        return "a one-node SLURM needs root (slurmd starts the jobs as their user)"
    return None


class Cluster:
    """The one-node cluster of scripts/slurm_local.sh, and jobs of the template on it."""

    def __init__(self, folder: Path, data: Path) -> None:
        self.folder, self.data = folder, data
        # a pytest run inside a SLURM job must not hand its own job's variables to sbatch
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        self.env.update(
            SLURM_CONF=str(folder / "slurm.conf"),
            PATH=f"{os.environ.get('PATH', '')}:/usr/sbin",
            PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
            PYTHONWARNINGS="ignore",
            WANDB_MODE="offline",
        )

    def run(self, *command: str) -> str:
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{' '.join(command)}: {done.stdout}{done.stderr}"
        return done.stdout

    def submit(self, out: Path, *options: str, template: Path = TEMPLATE, **overrides) -> str:
        """``sbatch`` of the template as a user submits it from the clone, its #SBATCH lines
        for 2 GPU nodes overridden for this CPU node; returns the job id."""
        env = dict(self.env, RECIPE="mabt_cifar_cpu.yaml", ACCELERATOR="cpu", PYTHON=sys.executable)
        env.update(DATA=str(self.data), OUT=str(out))
        args = [f"{k}={v}" for k, v in {**OVERRIDES, **overrides}.items()]
        command = [
            "sbatch", "--parsable", "--nodes=1", "--ntasks-per-node=2", "--cpus-per-task=1", "--gres=none",
            f"--output={out}/%x-%j.out", *options, str(template), *args,
        ]  # fmt: skip
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().split(";")[0]

    def job(self, job_id: str) -> Dict[str, str]:
        """``scontrol show job``'s fields (JobState, Restarts, ExitCode, RunTime...)."""
        return dict(re.findall(r"(\w+)=(\S*)", self.run("scontrol", "show", "job", "--oneliner", job_id)))

    def wait(self, job_id: str, states: set, out: Path, timeout: float, restarts: Optional[int] = None) -> dict:
        """The job's fields once its state is one of ``states`` (and it was requeued ``restarts`` times)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.job(job_id)
            if info["JobState"] in states and (restarts is None or int(info["Restarts"]) == restarts):
                return info
            time.sleep(0.5)
        raise AssertionError(f"job {job_id} not {states} after {timeout} s: {info}\n{log(out, job_id)[-4000:]}")


def log(out: Path, job_id: str) -> str:
    """The job's output file (all its starts: --open-mode=append); every job's in ``out`` for
    a task of an array (its file is named by the task's own job id)."""
    path = out / f"mvssl-pretrain-{job_id}.out"
    return path.read_text() if path.is_file() else "".join(p.read_text() for p in sorted(out.glob("*.out")))


def only_run(out: Path) -> Path:
    (run,) = (out / "mabt").iterdir()  # one run folder, whatever happened to the job
    return run


def launches(run: Path) -> List[dict]:
    return read_json(run / RUN_LOG, {"launches": []})["launches"]


def step(checkpoint: Path) -> int:
    import torch

    return torch.load(checkpoint, map_location="cpu", weights_only=False)["global_step"]


def wait_until(condition, timeout: float, what: str, out: Path, job_id: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout} s\n{log(out, job_id)[-4000:]}")


def stopped_at(status: str) -> tuple:
    """(signal name, epoch, step) of a launch's ``interrupted: SIGTERM at epoch 1, step 23``."""
    found = re.fullmatch(r"interrupted: (SIG\w+) at epoch (\d+), step (\d+)", status)
    assert found, status
    return found.group(1), int(found.group(2)), int(found.group(3))


def assert_one_continued_run(run: Path, statuses: List[str], job_ids: List[str], restarts: List[int]) -> None:
    """One run folder whose launches ended as ``statuses`` (prefixes), in these jobs and starts,
    each after the first resuming where the one before stopped: the clocks only grow, one
    metrics row per completed epoch."""
    entries = launches(run)
    assert [e["status"][: len(s)] for e, s in zip(entries, statuses)] == statuses and len(entries) == len(statuses)
    assert [e["slurm_job"] for e in entries] == job_ids
    assert [e["slurm_restarts"] for e in entries] == restarts
    seconds = [e["train_seconds"] for e in entries]
    assert all(a < b for a, b in zip(seconds, seconds[1:])), seconds
    rows = read_csv(run / METRICS)
    assert [int(r["epoch"]) for r in rows] == list(range(len(rows)))
    assert [int(r["step"]) for r in rows] == [STEPS * (i + 1) for i in range(len(rows))]
    clock = [float(r["train_seconds"]) for r in rows]
    assert all(a < b for a, b in zip(clock, clock[1:])), clock
    assert not list(run.glob("*.part")) and not (run / "run.lock").exists()


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("slurm_data")
    make_image_folder(root / "train", per_class=PER_CLASS)
    make_image_folder(root / "val", per_class=4, seed=1)
    return root


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, data):
    reason = missing_slurm()
    if reason:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("slurm")
    # 4 CPUs on this node: the time-limited job runs beside the other tests' jobs
    env = dict(os.environ, CPUS="4")
    started = subprocess.run(
        ["bash", str(CLUSTER_SCRIPT), "start", str(folder)], env=env, capture_output=True, text=True
    )
    if started.returncode != 0:  # installed, but it cannot start here (no munge key dir, ports...)
        subprocess.run(["bash", str(CLUSTER_SCRIPT), "stop", str(folder)], capture_output=True, timeout=120)
        pytest.skip(f"a one-node SLURM did not start: {started.stderr.strip()[-500:]}")
    yield Cluster(folder, data)
    subprocess.run(["bash", str(CLUSTER_SCRIPT), "stop", str(folder)], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def time_limited(cluster, tmp_path_factory) -> tuple:
    """A job of the template without its --signal line, given one minute: SLURM's time limit
    ends it (60 to 90 s after its start, SLURM checks limits every 30 s). Submitted by the first
    test that asks, so its wait overlaps the other tests."""
    out = tmp_path_factory.mktemp("time_limit")
    template = out / "pretrain-no-signal.sbatch"
    text = TEMPLATE.read_text()
    assert "#SBATCH --signal=" in text
    template.write_text("".join(line for line in text.splitlines(True) if not line.startswith("#SBATCH --signal=")))
    return cluster.submit(out, "--time=1", template=template, max_epochs=1000), out


@pytest.mark.slow
def test_a_sweep_as_a_job_array_trains_one_run_per_task(cluster, tmp_path):
    sweep = tmp_path / "sweep.txt"
    sweep.write_text("method_kwargs.proj_output_dim=16\nmethod_kwargs.proj_output_dim=32 optimizer.lr=0.2\n")
    cluster.env["SWEEP"] = str(sweep)
    try:
        array = cluster.submit(tmp_path, "--time=10", "--array=0-1", max_epochs=1)
    finally:
        del cluster.env["SWEEP"]
    for task in (0, 1):
        info = cluster.wait(f"{array}_{task}", {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, tmp_path, 240)
        assert info["JobState"] == "COMPLETED", log(tmp_path, array)[-4000:]
    runs = {read_json(run / ARGS)["method_kwargs"]["proj_output_dim"]: run for run in (tmp_path / "mabt").iterdir()}
    assert sorted(runs) == [16, 32] and len(list((tmp_path / "mabt").iterdir())) == 2  # one run folder per task
    # the whole line is the task's: solo-learn scales lr 0.2 by batch 8 x 2 processes / 256
    assert read_json(runs[32] / ARGS)["optimizer"]["lr"] == pytest.approx(0.2 * 8 * 2 / 256)
    for task, dim in enumerate((16, 32)):
        (launch,) = launches(runs[dim])
        assert launch["slurm_job"] == f"{array}_{task}" and launch["status"] == "finished"
        (checkpoint,) = runs[dim].glob("*.ckpt")
        assert step(checkpoint) == STEPS


@pytest.mark.slow
def test_scontrol_requeue_mid_epoch_resumes_in_the_same_run_folder(cluster, time_limited, tmp_path):
    """The template trains two processes of one run to its last epoch, through a requeue. (The
    time-limited job of ``time_limited`` is started here, to run out its minute meanwhile.)"""
    job = cluster.submit(tmp_path, "--time=10", max_epochs=4)
    wait_until(lambda: list(tmp_path.glob("mabt/*/*-ep=0.ckpt")), 180, "epoch 0's checkpoint", tmp_path, job)
    cluster.run("scontrol", "requeue", job)
    info = cluster.wait(job, {"COMPLETED", "FAILED", "CANCELLED"}, tmp_path, timeout=240, restarts=1)
    assert info["JobState"] == "COMPLETED", log(tmp_path, job)[-4000:]
    run = only_run(tmp_path)
    args = read_json(run / ARGS)
    # 2 processes of one run: Lightning's devices from --ntasks-per-node, num_nodes from the allocation
    assert args["devices"] == [0, 1] and args["num_nodes"] == 1 and args["strategy"] == "ddp"
    assert args["run_summary"]["hardware"].startswith("cpu, 2 process(es)")
    assert f"; {STEPS} steps per epoch;" in args["run_summary"]["batch"]
    assert_one_continued_run(run, ["interrupted: SIGTERM", "finished"], [job, job], [0, 1])
    name, epoch, at = stopped_at(launches(run)[0]["status"])
    assert epoch >= 1 and STEPS * epoch < at <= STEPS * (epoch + 1)  # inside the epoch it names
    text = log(tmp_path, job)
    assert f"resuming from the newest complete checkpoint that matches this config: {run}" in text
    assert f"ep={epoch}-stopped.ckpt" in text
    (checkpoint,) = run.glob("*.ckpt")  # the stopped checkpoint was replaced by the next ones
    assert checkpoint.name.endswith("-ep=3.ckpt") and step(checkpoint) == 4 * STEPS


@pytest.mark.slow
def test_the_warning_signal_checkpoints_and_the_job_requeues_itself(cluster, tmp_path):
    """The template's ``--signal=USR1@120``: the job's time limit is brought within those 120 s
    (TimeLimit=2 once it has run under a minute), SLURM sends SIGUSR1 at its next check, the run
    stops with a checkpoint and rank 0 requeues the job, which resumes when it starts again."""
    job = cluster.submit(tmp_path, "--time=10", max_epochs=1000)
    wait_until(lambda: list(tmp_path.glob("mabt/*/*-ep=0.ckpt")), 180, "epoch 0's checkpoint", tmp_path, job)
    ran = cluster.job(job)["RunTime"]
    assert ran.startswith("00:00:"), f"the job ran {ran} before its first checkpoint: TimeLimit=2 would not warn"
    cluster.run("scontrol", "update", f"JobId={job}", "TimeLimit=2")
    cluster.wait(job, {"PENDING", "RUNNING"}, tmp_path, timeout=120, restarts=1)
    cluster.run("scontrol", "update", f"JobId={job}", "TimeLimit=10")  # its next start: no warning
    run = only_run(tmp_path)
    wait_until(lambda: len(read_csv(run / METRICS)) > stopped_at(launches(run)[0]["status"])[1], 180,
               "an epoch of the requeued job", tmp_path, job)  # fmt: skip
    cluster.run("scancel", job)
    cluster.wait(job, {"CANCELLED"}, tmp_path, timeout=120)
    assert_one_continued_run(run, ["interrupted: SIGUSR1", "interrupted: SIGTERM"], [job, job], [0, 1])
    text = log(tmp_path, job)
    assert f"SLURM job {job} requeued: it resumes from this checkpoint when it starts again" in text
    assert re.search(r"resuming from the newest complete checkpoint .*-stopped\.ckpt", text)


@pytest.mark.slow
def test_a_time_limit_and_scancel_each_end_resumable(cluster, time_limited, tmp_path):
    """The time-limited job (SIGTERM twice at the limit, SIGKILL 30 s later) ends TIMEOUT with a
    stopped checkpoint; the same job submitted again resumes it and is cancelled with scancel
    once it has trained an epoch (a stopped checkpoint again); submitted once more, it resumes
    that one (and is cancelled the same way: max_epochs is one of the keys that name a run, so
    the run cannot be shortened to end here)."""
    first, out = time_limited
    info = cluster.wait(first, {"TIMEOUT", "COMPLETED", "FAILED", "CANCELLED"}, out, timeout=240)
    assert info["JobState"] == "TIMEOUT", log(out, first)[-4000:]
    assert "DUE TO TIME LIMIT" in log(out, first)
    run = only_run(out)
    jobs = [first]
    for _ in range(2):
        (stopped,) = run.glob("*-stopped.ckpt")
        _, epoch, at = stopped_at(launches(run)[-1]["status"])
        assert step(stopped) == at and stopped.name.endswith(f"-ep={epoch}-stopped.ckpt")
        job = cluster.submit(out, "--time=10", max_epochs=1000)
        jobs.append(job)
        wait_until(lambda: len(read_csv(run / METRICS)) > epoch, 180, "an epoch after the resume", out, job)
        cluster.run("scancel", job)
        cluster.wait(job, {"CANCELLED"}, out, timeout=120)
        assert f"resuming from the newest complete checkpoint that matches this config: {stopped}" in log(out, job)
    assert_one_continued_run(run, ["interrupted: SIGTERM"] * 3, jobs, [0, 0, 0])


# ------------------------------------------------------------------ the pieces, no cluster


def test_slurm_job_id_names_an_array_task_alone():
    from mvssl_plugin.train.signals import slurm_job_id

    assert slurm_job_id({}) is None
    assert slurm_job_id({"SLURM_JOB_ID": "41"}) == "41"
    array = {"SLURM_JOB_ID": "57", "SLURM_ARRAY_JOB_ID": "50", "SLURM_ARRAY_TASK_ID": "7"}
    assert slurm_job_id(array) == "50_7"  # "57" is the task's own id; "50" alone would requeue every task


def test_a_repeated_sigterm_is_the_same_stop_and_a_second_ctrl_c_interrupts():
    """SLURM sends SIGTERM twice at a time limit (measured on SLURM 22.05); the second one
    must not cut the checkpoint the first one asked for."""
    from mvssl_plugin.train.signals import GracefulStop

    stop = GracefulStop()
    stop._handle(signal.SIGTERM, None)
    stop._handle(signal.SIGTERM, None)
    stop._handle(signal.SIGUSR1, None)
    assert stop.signum == signal.SIGTERM
    with pytest.raises(KeyboardInterrupt):
        stop._handle(signal.SIGINT, None)


def test_every_process_stops_for_the_warning_when_one_got_it():
    """SLURM signals the tasks one by one: rank 0 may not have its SIGUSR1 yet at the step
    where the processes agree to stop. The warning is then decided for all, so rank 0 (the
    one that requeues) stops for it too."""
    from types import SimpleNamespace

    from mvssl_plugin.train.signals import GracefulStop

    strategy = SimpleNamespace(reduce_boolean_decision=lambda decision, all: True)  # a peer said yes
    trainer = SimpleNamespace(
        world_size=2, strategy=strategy, should_stop=False, is_global_zero=True, current_epoch=1, global_step=20
    )
    stop = GracefulStop()
    stop.on_train_batch_end(trainer, None, None, None, 0)
    assert stop.signum == signal.SIGUSR1 and trainer.should_stop and stop.where == "epoch 1, step 20"
    strategy.reduce_boolean_decision = lambda decision, all: decision  # alone: no signal, no stop
    alone = GracefulStop()
    trainer.should_stop = False
    alone.on_train_batch_end(trainer, None, None, None, 0)
    assert alone.signum is None and not trainer.should_stop


def fake_scontrol(folder: Path, status: int, message: str = "") -> Dict[str, str]:
    """An ``scontrol`` on PATH that records its arguments and exits with ``status``."""
    script = folder / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$@" > {folder}/called\necho "{message}" >&2\nexit {status}\n')
    script.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize("status", [0, 1])
def test_after_the_warning_signal_rank_0_requeues_the_job(status, tmp_path, monkeypatch):
    from mvssl_plugin.train.signals import GracefulStop

    for key, value in fake_scontrol(tmp_path, status, "Requested operation is presently disabled").items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SLURM_JOB_ID", "41")
    stop = GracefulStop()
    stop.signum, stop.where, stop.checkpoint = signal.SIGUSR1, "epoch 1, step 20", tmp_path / "x-ep=1-stopped.ckpt"
    interrupted = stop.outcome()
    assert interrupted.exit_status == 128 + signal.SIGUSR1
    assert (tmp_path / "called").read_text().split() == ["requeue", "41"]
    if status == 0:
        assert str(interrupted).endswith("SLURM job 41 requeued: it resumes from this checkpoint when it starts again")
    else:
        assert "could not requeue SLURM job 41 (Requested operation is presently disabled)" in str(interrupted)
        assert str(interrupted).endswith("submit the same job again to resume")


def test_only_rank_0_requeues_and_sigterm_never_does(tmp_path, monkeypatch):
    from mvssl_plugin.train.signals import GracefulStop

    for key, value in fake_scontrol(tmp_path, 0).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SLURM_JOB_ID", "41")
    other = GracefulStop()
    other.signum, other.checkpoint, other.global_zero = signal.SIGUSR1, tmp_path / "x-stopped.ckpt", False
    assert str(other.outcome()).endswith("rank 0 requeues SLURM job 41")
    term = GracefulStop()
    term.signum, term.checkpoint = signal.SIGTERM, tmp_path / "x-stopped.ckpt"
    assert str(term.outcome()).endswith("run the same command again to resume")
    assert not (tmp_path / "called").exists()


def test_under_slurm_lightnings_auto_requeue_and_hpc_resume_are_off(tmp_path):
    from lightning.fabric.plugins.environments import SLURMEnvironment

    from mvssl_plugin.train.trainer import slurm_options

    job = {"SLURM_NTASKS": "2", "SLURM_JOB_NAME": "mvssl-pretrain", "SLURM_JOB_ID": "41"}
    options = slurm_options(str(tmp_path / "mabt"), job)
    (environment,) = options["plugins"]
    assert isinstance(environment, SLURMEnvironment) and environment.auto_requeue is False
    assert options["default_root_dir"] == str(tmp_path / "mabt")  # not the working folder's hpc_ckpt_*.ckpt
    assert slurm_options("x", {}) == {}
    assert slurm_options("x", dict(job, SLURM_JOB_NAME="interactive")) == {}  # salloc + python: not a SLURM run
