"""Making ``accelerator``, ``devices``, ``precision`` and ``strategy`` work on the machine at hand."""

from __future__ import annotations

import os
from typing import Any, Tuple

from omegaconf import DictConfig, OmegaConf

from mvssl_plugin.config.values import AUTO, is_int, select
from mvssl_plugin.errors import ConfigError


def world_size(cfg: DictConfig) -> int:
    """Processes of the run: devices (a list once :func:`adapt_to_hardware` ran) x nodes."""
    devices = select(cfg, "devices", 1)
    return (devices if is_int(devices) else len(devices)) * int(select(cfg, "num_nodes", 1) or 1)


def device_count(devices: Any, accelerator: str) -> int:
    if is_int(devices):
        return int(devices)
    if isinstance(devices, str):
        if devices == AUTO:
            import torch

            return max(1, torch.cuda.device_count()) if accelerator == "gpu" else 1
        return len([d for d in devices.split(",") if d.strip()])
    return len(devices)


def adapt_to_hardware(cfg: DictConfig) -> list[str]:
    """Makes ``accelerator``/``devices``/``precision`` work on the machine at hand.

    solo-learn reads ``len(cfg.devices)`` while Lightning's CPU accelerator wants an
    integer: devices are kept as a list in the config (solo-learn's layout, also in
    args.json) and :func:`trainer_devices` hands Lightning what it accepts.
    ``accelerator: auto`` (the recipes' default) becomes ``gpu`` or ``cpu``; on a CPU,
    half-precision mixed training becomes 32-bit, a one-device ``ddp`` plain, and
    ``sync_batchnorm`` (GPU-only in torch) off for several processes.
    Returns the notices to print.
    """
    import torch

    notices = []
    accelerator = str(select(cfg, "accelerator", AUTO))
    has_cuda = torch.cuda.is_available()
    if accelerator == AUTO:
        accelerator = "gpu" if has_cuda else "cpu"
    if accelerator == "cuda":
        accelerator = "gpu"
    if accelerator == "gpu" and not has_cuda:
        raise ConfigError("accelerator=gpu but no CUDA device is visible: use accelerator=cpu (or auto)")
    if accelerator not in ("gpu", "cpu"):
        raise ConfigError(f"accelerator={accelerator!r}: use auto, gpu or cpu")
    cfg.accelerator = accelerator
    devices = select(cfg, "devices", 1)
    try:
        n = device_count(devices, accelerator)
    except TypeError:
        n = 0
    if n < 1:
        raise ConfigError(f"devices={devices!r}: give a number of devices >= 1 or a list of device ids")
    if is_int(devices) or isinstance(devices, str):
        cfg.devices = list(range(n))
    if accelerator == "cpu":
        precision = str(select(cfg, "precision", "32"))
        if precision in ("16", "16-mixed"):
            cfg.precision = "32"
            notices.append(f"precision={precision} is not supported on a CPU; using precision=32")
        if select(cfg, "strategy") == "ddp" and n == 1:
            cfg.strategy = AUTO
            notices.append("strategy=ddp with one CPU process; using strategy=auto")
        if select(cfg, "sync_batchnorm", False) and n > 1:
            cfg.sync_batchnorm = False
            notices.append(
                "sync_batchnorm=True needs GPUs (torch's SyncBatchNorm); each CPU process normalizes its own batch"
            )
    if select(cfg, "strategy") is None:
        cfg.strategy = AUTO
    if accelerator == "cpu":
        notices += set_cpu_threads(cfg, n * int(select(cfg, "num_nodes", 1) or 1))
    return notices


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask: a container's or taskset's share)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def plan_cpu_threads(cores: int, processes: int, workers: int, data_format: str) -> Tuple[int, int]:
    """(torch intra-op threads, loader workers) per process for a CPU run.

    Why: torch's default takes one OpenMP thread per core, and its threads spin-wait
    between operations; beside loader workers (or other processes) on a small machine they
    wait on each other instead of computing (an 18-step CPU run took 216 s with torch's
    defaults, 17 s with one thread, on a 2-core machine shared with other work; see
    benchmarks/bench_threads.py). So each process gets an equal share of the cores, the
    loader workers are capped at that share, and torch takes what the workers leave, at
    least one thread. The in-memory format has no workers: its augmentations are torch ops
    in the training process, so torch takes the whole share. DALI's CPU threads count as
    workers."""
    share = max(1, cores // max(1, processes))
    if data_format == "memory":
        return share, workers
    workers = min(workers, share)
    return max(1, share - workers), workers


def set_cpu_threads(cfg: DictConfig, processes: int) -> list[str]:
    """Applies :func:`plan_cpu_threads` (``performance.cpu_threads: auto``, the default) or the
    number given, unless ``OMP_NUM_THREADS`` says otherwise; records the choice in the config
    (so in args.json). Returns the notices to print."""
    import torch

    notices = []
    requested = select(cfg, "performance.cpu_threads", AUTO)
    if requested != AUTO and not (is_int(requested) and requested >= 1):
        raise ConfigError(f"performance.cpu_threads={requested!r}: use auto or an integer >= 1")
    workers = int(select(cfg, "data.num_workers", 0) or 0)
    data_format = str(select(cfg, "data.format", "image_folder"))
    threads, capped = plan_cpu_threads(usable_cores(), processes, workers, data_format)
    if capped < workers:
        cfg.data.num_workers = capped
        notices.append(
            f"data.num_workers={workers} on {usable_cores()} CPU cores for {processes} process(es): "
            f"using {capped} loader worker(s) so that they and torch's threads do not fight for the cores"
        )
    if requested != AUTO:
        threads = int(requested)
    elif os.environ.get("OMP_NUM_THREADS"):
        threads = torch.get_num_threads()  # the user's word
    torch.set_num_threads(threads)
    OmegaConf.update(cfg, "performance.cpu_threads", threads, force_add=True)
    return notices


def trainer_devices(cfg: DictConfig) -> Any:
    """What Lightning's Trainer takes for ``devices`` given solo-learn's list layout."""
    return len(cfg.devices) if cfg.accelerator == "cpu" else list(cfg.devices)
