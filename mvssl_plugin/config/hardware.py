"""Making ``accelerator``, ``devices``, ``precision`` and ``strategy`` work on the machine at hand."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

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
    return notices


def trainer_devices(cfg: DictConfig) -> Any:
    """What Lightning's Trainer takes for ``devices`` given solo-learn's list layout."""
    return len(cfg.devices) if cfg.accelerator == "cpu" else list(cfg.devices)
