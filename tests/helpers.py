"""What several test modules use: generated data, tiny recipe overrides, running an entry point."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launcher import Launched, launcher
from omegaconf import DictConfig, OmegaConf

from mvssl_plugin.synthetic import tiny_overrides, write_image_folder

REPO = Path(__file__).resolve().parents[1]
make_image_folder = write_image_folder


def has_dali() -> bool:
    """NVIDIA DALI is installed (the dali extra); its tests skip otherwise."""
    return importlib.util.find_spec("nvidia") is not None and importlib.util.find_spec("nvidia.dali") is not None


NEEDS_DALI = pytest.mark.skipif(not has_dali(), reason="the dali extra is not installed")


def console_script(name: str) -> str:
    """The installed console script beside the interpreter under test (``venv/bin/mvssl-embed``),
    so ``make test PYTHON=venv/bin/python`` tests that venv's scripts without its activation;
    the bare name (found on PATH) where the interpreter's folder has none."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


def cpu_autocast_enabled() -> bool:
    """Whether autocast is on for the CPU. torch >= 2.4 asks per device (``is_autocast_enabled("cpu")``);
    an older torch's ``is_autocast_enabled`` takes no argument (it answers for CUDA) and has
    ``is_autocast_cpu_enabled`` for the CPU, deprecated since."""
    import torch  # local: the only helper that needs torch

    try:
        return torch.is_autocast_enabled("cpu")
    except TypeError:  # torch < 2.4
        return torch.is_autocast_cpu_enabled()


__all__ = [
    "NEEDS_DALI",
    "assert_one_line",
    "cpu_autocast_enabled",
    "has_dali",
    "kill_in_second_epoch",
    "start_entry",
    "wait_for",
    "REPO",
    "make_image_folder",
    "run_entry",
    "solo_shaped_cfg",
    "tiny_overrides",
    "write_image_folder",
]


def start_entry(script: str, args: list[str], cwd: Path, capture: bool = False) -> subprocess.Popen | Launched:
    """Starts ``python <repo>/<script> args...`` in the background (to be killed or signalled),
    its output discarded or, with ``capture``, kept for ``communicate()`` (forked from the
    preloaded launcher where it can be, see tests/launcher.py)."""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    preloaded = launcher(env)
    if preloaded is not None:
        return preloaded.start([str(REPO / script), *args], cwd, env)
    return subprocess.Popen(
        [sys.executable, str(REPO / script), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
        stderr=subprocess.PIPE if capture else subprocess.DEVNULL,
        text=True,
    )


def wait_for(pattern: str, root: Path, timeout: float = 120) -> Path:
    """The first file under ``root`` matching ``pattern``, once one exists (TimeoutError after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        hits = sorted(root.glob(pattern))
        if hits:
            return hits[0]
        time.sleep(0.02)
    raise TimeoutError(pattern)


def kill_in_second_epoch(args: list[str], cwd: Path, method: str = "mabt") -> None:
    """Runs ``main_pretrain.py args`` and SIGKILLs it just after its epoch-0 checkpoint lands."""
    run = start_entry("main_pretrain.py", args, cwd=cwd)
    try:
        wait_for(f"{method}/*/*-ep=0.ckpt", cwd)
        time.sleep(0.3)  # into epoch 1
        assert run.poll() is None, "the run ended before it could be killed"
        run.send_signal(signal.SIGKILL)
    finally:
        run.wait()


def run_entry(
    script: str,
    args: list[str],
    cwd: Path,
    timeout: int = 300,
    env: dict | None = None,
    fresh: bool = False,
    **popen,
) -> subprocess.CompletedProcess:
    """Runs ``python <repo>/<script> args...`` as a user would, from ``cwd``; ``env`` adds to
    (a value of None: removes from) the environment, ``popen`` goes to subprocess.run. Forked
    from the preloaded launcher where it can be (tests/launcher.py: the same process, less
    the 10 s of imports), else, or with ``fresh`` (what the entry point does before it imports
    torch is under test), a fresh interpreter."""
    # a wandb run made in this process leaves WANDB_SERVICE set: a child would attach to that
    # service and write its files elsewhere; each command gets its own, files under cwd
    extra = env or {}
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_SERVICE", "WANDB_DIR")}
    env.update(PYTHONWARNINGS="ignore", WANDB_DIR=str(cwd))
    env.update({k: v for k, v in extra.items() if v is not None})
    env = {k: v for k, v in env.items() if extra.get(k, "") is not None}
    preloaded = None if popen or fresh else launcher(env)
    if preloaded is not None:
        return preloaded.run([str(REPO / script), *args], cwd, env, timeout)
    return subprocess.run(
        [sys.executable, str(REPO / script), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **popen,
    )


def solo_shaped_cfg(method: str, num_large: int, num_small: int = 0, batch_size: int = 4) -> DictConfig:
    """A config of the shape solo-learn's method tests build (no augmentations, no recipe)."""
    cfg = OmegaConf.create(
        {
            "name": "contract",
            "method": method,
            "backbone": {"name": "resnet18"},
            "data": {
                "dataset": "custom",
                "train_path": ".",
                "val_path": ".",
                "format": "image_folder",
                "num_workers": 0,
                "num_large_crops": num_large,
                "num_small_crops": num_small,
                "num_classes": 5,
            },
            "optimizer": {
                "name": "lars",
                "batch_size": batch_size,
                "lr": 0.3,
                "classifier_lr": 0.1,
                "weight_decay": 1e-5,
                "kwargs": {"momentum": 0.9},
            },
            "scheduler": {"name": "warmup_cosine"},
            "checkpoint": {"enabled": False},
            "auto_resume": {"enabled": False},
            "max_epochs": 1,
            "devices": 1,
            "accelerator": "cpu",
            "num_nodes": 1,
            "method_kwargs": {"proj_hidden_dim": 64, "proj_output_dim": 32},
        }
    )
    OmegaConf.set_struct(cfg, False)
    return cfg


def assert_one_line(result: subprocess.CompletedProcess, status: int, *fragments: str) -> str:
    """The run ended with ``status`` and one ``mvssl ...`` error line holding every fragment."""
    assert result.returncode == status, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr + result.stdout
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("mvssl ")]
    for fragment in fragments:
        assert fragment in line, line
    return line


def pretrain_args(data: dict, out: Path, **extra) -> list[str]:
    """``main_pretrain.py`` arguments of a tiny run of the paper's recipe."""
    return ["--config-name", "mabt_cifar.yaml", *tiny_overrides(data, out, **extra)]


def checked_config(recipe: str, on: str, **overrides) -> DictConfig:
    """A recipe composed with ``overrides`` as the checks see it on ``on`` (cpu / gpu): devices
    as a list, crop counts set; fp32 on the CPU."""
    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.config import set_crop_counts

    cfg = compose_recipe(recipe, "pretrain", [f"{k}={v}" for k, v in overrides.items()])
    cfg.accelerator = on
    cfg.devices = list(range(cfg.devices)) if isinstance(cfg.devices, int) else list(cfg.devices)
    if on == "cpu":
        cfg.precision = "32"
    set_crop_counts(cfg)
    return cfg
