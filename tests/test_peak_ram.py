"""The peak-RAM estimate (peak_ram.py) against a measured peak."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import REPO, checked_config, make_image_folder, pretrain_args

from mvssl_plugin.peak_ram import GiB

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.slow
def test_estimate_is_close_to_a_measured_peak(tiny_cifar, tmp_path):
    """Peak RSS of two training steps in a child process (os.wait4) against the estimate
    (calibrated within -6%..+5% on 11 settings: benchmarks/bench_peak_ram.py)."""
    from mvssl_plugin.peak_ram import estimate_peak
    from mvssl_plugin.train.peak_ram_check import run_shape

    train = make_image_folder(tmp_path / "train", classes=4, per_class=40)
    extra = {"data.val_path": "null", "optimizer.batch_size": 64, "+backbone.kwargs.width": 16}
    # fp32, the calibrated precision: mabt_cifar.yaml's 16-mixed becomes bf16-mixed on a bf16 CPU,
    # whose peak was 0.87x the fp32 one in this venv and 1.58x in a fresh CI venv (not calibrated)
    extra.update({"checkpoint.enabled": False, "+limit_train_batches": 2, "+num_sanity_val_steps": 0, "precision": 32})
    args = pretrain_args({"train": str(train), "test": tiny_cifar["test"]}, tmp_path, **extra)
    shape = run_shape(checked_config("mabt_cifar.yaml", "cpu", **dict(a.split("=", 1) for a in args[2:])))
    child = subprocess.Popen(
        [sys.executable, str(REPO / "main_pretrain.py"), *args],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONWARNINGS="ignore"),
    )
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    assert child.returncode == 0
    measured, estimated = usage.ru_maxrss * 1024, estimate_peak(shape).total
    assert 0.85 < estimated / measured < 1.15, (measured / GiB, estimated / GiB)
