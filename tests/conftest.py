"""Shared fixtures: tiny generated ImageFolder trees (no real data). Helpers: tests/helpers.py."""

from __future__ import annotations

import os
from pathlib import Path

# The suite runs one pytest worker per core (make test: pytest-xdist), each with one torch
# thread, set before torch is imported here or in the entry points the tests start: a worker's
# two OpenMP threads beside the other worker's would wait on each other (one_thread below).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
from helpers import make_image_folder  # noqa: E402

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")

#: the modules that take longest (pytest --durations, summed per module): collected first, so
#: that the workers take them first and the short ones fill in at the end
LONGEST_FIRST = (
    "benchmarks/test_slurm.py",
    "test_autoregister.py",
    "losses/test_distributed.py",
    "config/test_hardware.py",
    "test_runs.py",
    "train/test_trainer.py",
    "encoder/test_encoder.py",
)


def pytest_collection_modifyitems(items: list) -> None:
    """Items of :data:`LONGEST_FIRST`'s modules first, in that order; the rest as collected."""

    def rank(item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return next((i for i, name in enumerate(LONGEST_FIRST) if path.endswith(name)), len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: each module's own order is kept


@pytest.fixture(scope="session")
def tiny_cifar(tmp_path_factory) -> dict:
    """A CIFAR-10-shaped ImageFolder copy: train (3 x 8 images) and test (3 x 4)."""
    root = tmp_path_factory.mktemp("tiny_cifar")
    return {
        "train": str(make_image_folder(root / "train", per_class=8)),
        "test": str(make_image_folder(root / "test", per_class=4, seed=1)),
    }


@pytest.fixture
def one_thread(monkeypatch):
    """Entry points a test starts run with one torch thread: on a shared 2-core machine two
    OpenMP threads wait on each other, and a width-4 network's batch norm took 24 ms instead
    of 0.06 ms. Modules of such tests say ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="module")
def finished_tiny_run(tiny_cifar, tmp_path_factory):
    """One finished 1-epoch tiny run of the paper's recipe, per test module (its folder is
    copied, never changed, by the tests)."""
    from helpers import pretrain_args, run_entry

    out = tmp_path_factory.mktemp("pretrained")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        result = run_entry("main_pretrain.py", pretrain_args(tiny_cifar, out), out)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (run_dir,) = (out / "mabt").iterdir()
    return run_dir


def _pretrain_run(data: dict, out: Path, recipe: str, **extra) -> tuple[Path, str]:
    """A finished 2-epoch tiny run of ``recipe`` (its folder, its stdout)."""
    from helpers import run_entry, tiny_overrides

    overrides = tiny_overrides(
        data,
        out,
        max_epochs=2,
        **{"time_to_accuracy.metrics": "[val_acc5]", "time_to_accuracy.targets": "[10,100]", **extra},
    )
    result = run_entry("main_pretrain.py", ["--config-name", recipe, *overrides], cwd=out)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (folder,) = [p.parent for p in out.rglob("args.json")]
    return folder, result.stdout


@pytest.fixture(scope="session")
def two_finished_runs(tiny_cifar, tmp_path_factory) -> dict:
    """Two finished 2-epoch tiny runs side by side under ``root``, for the evaluations and
    the run's own records (never changed by the tests): ``mabt`` (4 views, wandb offline,
    time-to-accuracy on val_acc5; ``mabt_stdout`` its log) in ``root/a``, and solo-learn's
    ``barlow_twins`` (2 views) in ``root/b``."""
    root = tmp_path_factory.mktemp("two_runs")
    (root / "a").mkdir()
    (root / "b").mkdir()
    mabt, stdout = _pretrain_run(
        tiny_cifar, root / "a", "mabt_cifar.yaml", **{"wandb.enabled": True, "wandb.offline": True}
    )
    solo_bt, _ = _pretrain_run(tiny_cifar, root / "b", "mabt_cifar_2views_d8192.yaml", method="barlow_twins")
    return {"root": root, "mabt": mabt, "mabt_stdout": stdout, "barlow_twins": solo_bt}
