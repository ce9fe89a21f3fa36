"""Every CPU: no configuration hits torch's oneDNN channels-last fault, and CPU runs share
the cores between torch's threads and the loader workers. Through main_pretrain.py."""

from __future__ import annotations

import pytest
from helpers import run_entry, tiny_overrides

from mvssl_plugin.config.hardware import plan_cpu_threads, usable_cores
from mvssl_plugin.runs import ARGS, read_json

#: what makes oneDNN pick its AVX2 kernels on any x86 CPU (an AVX-512 one included)
AVX2_ONLY = {"DNNL_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "1"}


def pretrain(data: dict, out, env=None, **extra):
    out.mkdir(parents=True, exist_ok=True)
    args = ["--config-name", "mabt_cifar.yaml", *tiny_overrides(data, out, **extra)]
    return run_entry("main_pretrain.py", args, out, env=env)


@pytest.mark.slow
def test_a_width_4_backbone_trains_contiguous_where_channels_last_would_corrupt_memory(tiny_cifar, tmp_path):
    """Width 4 channels-last aborts with "double free or corruption" on its first backward
    under AVX2-only oneDNN; the run goes contiguous, says so, and records it."""
    result = pretrain(tiny_cifar, tmp_path, env=AVX2_ONLY, **{"+backbone.kwargs.width": 4})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    notices = [line for line in result.stdout.splitlines() if "channels-last is off on the CPU" in line]
    assert len(notices) == 1 and "backbone.kwargs.width" in notices[0]
    (run_dir,) = (tmp_path / "mabt").iterdir()
    assert read_json(run_dir / ARGS)["performance"]["disable_channel_last"] is True


@pytest.mark.slow
def test_the_tests_width_trains_channels_last_on_avx2(tiny_cifar, tmp_path):
    result = pretrain(tiny_cifar, tmp_path, env=AVX2_ONLY)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "channels-last is off" not in result.stdout
    (run_dir,) = (tmp_path / "mabt").iterdir()
    assert read_json(run_dir / ARGS)["performance"]["disable_channel_last"] is False


@pytest.mark.parametrize(
    "cores, processes, workers, expected",
    [
        (2, 1, 2, (2, 2)),
        (2, 1, 4, (2, 2)),  # more workers than cores: capped
        (2, 1, 0, (2, 0)),
        (16, 4, 8, (4, 4)),  # CPU DDP: a share each (torch's default gives each all 16)
        (2, 4, 2, (1, 1)),  # more processes than cores: one each
    ],
)
def test_plan_cpu_threads(cores, processes, workers, expected):
    assert plan_cpu_threads(cores, processes, workers) == expected


@pytest.mark.slow
def test_a_cpu_run_chooses_its_threads_and_caps_its_workers(tiny_cifar, tmp_path):
    workers = usable_cores() + 2
    result = pretrain(tiny_cifar, tmp_path, env={"OMP_NUM_THREADS": None}, **{"data.num_workers": workers})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    threads, capped = plan_cpu_threads(usable_cores(), 1, workers)
    assert f"data.num_workers={workers} on {usable_cores()} CPU cores" in result.stdout
    (run_dir,) = (tmp_path / "mabt").iterdir()
    args = read_json(run_dir / ARGS)
    assert (args["performance"]["cpu_threads"], args["data"]["num_workers"]) == (threads, capped)


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra, env, wait",
    [
        ({"data.num_workers": 1}, {"OMP_WAIT_POLICY": None}, "PASSIVE"),  # workers share the cores
        ({"data.num_workers": 1}, {"OMP_WAIT_POLICY": "ACTIVE"}, "ACTIVE"),  # the user's word
        ({"data.format": "memory"}, {"OMP_WAIT_POLICY": None}, "default"),  # no workers: spinning pays
    ],
)
def test_openmp_threads_sleep_where_loader_workers_share_the_cores(extra, env, wait, tiny_cifar, tmp_path):
    result = pretrain(tiny_cifar, tmp_path, env=env, **extra)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (hardware,) = [line for line in result.stdout.splitlines() if line.strip().startswith("hardware")]
    assert f"(OpenMP wait {wait})" in hardware, hardware


@pytest.mark.slow
def test_omp_num_threads_and_the_key_win_over_the_rule(tiny_cifar, tmp_path):
    result = pretrain(tiny_cifar, tmp_path / "a", env={"OMP_NUM_THREADS": "1"}, **{"data.num_workers": 0})
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = (tmp_path / "a" / "mabt").iterdir()
    assert read_json(run_dir / ARGS)["performance"]["cpu_threads"] == 1
    bad = pretrain(tiny_cifar, tmp_path / "b", **{"+performance.cpu_threads": 0})
    assert bad.returncode == 2 and "performance.cpu_threads=0: use auto or an integer >= 1" in bad.stderr
