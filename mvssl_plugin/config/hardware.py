"""Making ``accelerator``, ``devices``, ``precision`` and ``strategy`` work on the machine at hand."""

from __future__ import annotations

import os
from functools import lru_cache
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
            # local: torch (~3 s) loads when the hardware is read: cli.exits imports this module
            # for openmp_wait_policy, which must set OMP_WAIT_POLICY before torch loads
            import torch

            return max(1, torch.cuda.device_count()) if accelerator == "gpu" else 1
        return len([d for d in devices.split(",") if d.strip()])
    return len(devices)


def adapt_to_hardware(cfg: DictConfig) -> list[str]:
    """Makes ``accelerator``/``devices``/``precision`` work on the machine at hand.

    solo-learn reads ``len(cfg.devices)`` while Lightning's CPU accelerator wants an
    integer: devices are kept as a list in the config (solo-learn's layout, also in
    args.json) and :func:`trainer_devices` hands Lightning what it accepts.
    ``accelerator: auto`` (the recipes' default) becomes ``gpu`` or ``cpu``. ``precision: auto``
    becomes mixed precision on a GPU and :func:`cpu_precision` on a CPU (bf16-mixed where bf16
    is native, else 32), as does fp16, which a CPU cannot run; the reason is kept as
    ``performance.precision_reason`` for the start block. On a CPU a one-device ``ddp``
    becomes plain, and ``sync_batchnorm`` (GPU-only in torch) off for several processes.
    Returns the notices to print.
    """
    import torch  # local: as in device_count

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
    # every process of the run, all nodes (torchrun --nnodes / SLURM: num_nodes x devices)
    processes = n * int(select(cfg, "num_nodes", 1) or 1)
    precision = str(select(cfg, "precision", "32"))
    if accelerator == "cpu":
        if precision in (AUTO, "16", "16-mixed"):  # auto, or fp16, which a CPU cannot run
            chosen, why = cpu_precision()
            cfg.precision = chosen
            asked = "auto" if precision == AUTO else f"{precision} on a CPU"
            OmegaConf.update(cfg, "performance.precision_reason", f"{asked}: {why}", force_add=True)
            if precision != AUTO:
                notices.append(f"precision={precision} is not supported on a CPU; using precision={chosen} ({why})")
        if select(cfg, "strategy") == "ddp" and processes == 1:
            cfg.strategy = AUTO
            notices.append("strategy=ddp with one CPU process; using strategy=auto")
        if select(cfg, "sync_batchnorm", False) and processes > 1:
            cfg.sync_batchnorm = False
            notices.append(
                "sync_batchnorm=True needs GPUs (torch's SyncBatchNorm); each CPU process normalizes its own batch"
            )
    elif precision == AUTO:
        cfg.precision = "bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed"
        OmegaConf.update(cfg, "performance.precision_reason", "auto: mixed precision on the GPU", force_add=True)
    if select(cfg, "strategy") is None:
        cfg.strategy = AUTO
    if accelerator == "cpu":  # the cores of one machine are shared by its own processes only
        notices += set_cpu_threads(cfg, n)
    choose_optimizer_path(cfg)
    return notices


#: ``performance.finite_check_every: auto``: steps between read-backs of the loss's finiteness
FINITE_CHECK_STEPS = {"cpu": 1, "gpu": 100}


def finite_check_every(cfg: DictConfig) -> int:
    """How often a run reads back whether its losses stayed finite (``performance.finite_check_every``).

    Why: the check is a device-to-host copy; on a CPU the value is already in host memory, so
    ``auto`` reads every step and stops before a non-finite loss moves the weights; on a GPU a
    read-back per step makes the host wait for the device, so ``auto`` keeps a flag on the device
    and reads it every 100 steps and at each epoch's end, before its checkpoint (a diverged run
    then trains on for at most 99 steps, and no checkpoint holds its weights). Not written into
    the config: ``auto`` resolves where it is read."""
    value = select(cfg, "performance.finite_check_every", AUTO)
    if value == AUTO:
        return FINITE_CHECK_STEPS.get(str(select(cfg, "accelerator", "cpu")), FINITE_CHECK_STEPS["gpu"])
    return int(value)


#: torch optimizers that have a fused implementation on CUDA, and on the CPU from torch 2.4:
#: solo-learn's names -> torch.optim's
FUSED_OPTIMIZERS = {"adam": "Adam", "adamw": "AdamW"}


@lru_cache(maxsize=4)
def fused_on_cpu(name: str) -> bool:
    """Whether this torch runs optimizer ``name`` (solo-learn's) fused on the CPU: one step of a
    one-element CPU parameter. Why a probe: torch 2.4 added the CPU kernels, and an older torch
    refuses ``fused=True`` for CPU parameters when solo-learn builds the optimizer (RuntimeError),
    which failed every CPU run with Adam under torch 2.2 and 2.3."""
    import torch  # local: as in device_count

    param = torch.zeros(1, requires_grad=True)
    param.grad = torch.ones(1)
    try:
        getattr(torch.optim, FUSED_OPTIMIZERS[name])([param], fused=True).step()
    except RuntimeError:
        return False
    return True


def choose_optimizer_path(cfg: DictConfig) -> None:
    """Adam and AdamW run fused (one kernel over every parameter) unless ``optimizer.kwargs``
    names ``fused`` or ``foreach``, or the run is on a CPU and this torch has no fused kernel
    there (:func:`fused_on_cpu`; torch's default then); the choice is kept as
    ``performance.optimizer_path`` for the start block. Why: torch's default on a CPU is a loop
    over the parameter tensors, several kernels each; fused, Adam's step over the speedrun
    model's 70 tensors took half the loop's time on the 2-core EPYC (2.2 against 4.5 ms), about
    1% of the whole step (docs/performance.md). The update is the same equation (tested)."""
    name = str(select(cfg, "optimizer.name", ""))
    if name not in FUSED_OPTIMIZERS:
        return
    kwargs = select(cfg, "optimizer.kwargs") or {}
    given = [key for key in ("fused", "foreach") if key in kwargs]
    if given:
        path = ", ".join(f"{key}={kwargs[key]}" for key in given) + " (as given)"
    elif select(cfg, "accelerator", "cpu") == "cpu" and not fused_on_cpu(name):
        path = f"torch's loop (auto: this torch has no fused {name} on the CPU; torch >= 2.4 has)"
    else:
        OmegaConf.update(cfg, "optimizer.kwargs.fused", True, force_add=True)
        path = "fused (auto: one kernel for every parameter)"
    OmegaConf.update(cfg, "performance.optimizer_path", path, force_add=True)


#: oneDNN's names (``DNNL_MAX_CPU_ISA``) of the instruction sets that compute bf16 natively
BF16_ISAS = ("AVX512_CORE_BF16", "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16", "AVX10_1_512_AMX", "ALL", "DEFAULT")


def cpu_bf16_native() -> Tuple[bool, str]:
    """Whether this CPU computes bf16 natively (AVX512_BF16 or AMX) as torch runs it, and why.

    Why it matters: with native bf16 the training step under bf16 autocast is much faster than
    fp32; an AVX2-only CPU emulates bf16, far slower than fp32 (figures: docs/hardware.md and
    benchmarks/results/cpu_fast_path/). Caps set
    through ``ATEN_CPU_CAPABILITY`` or ``DNNL_MAX_CPU_ISA`` count as the CPU's own."""
    import torch  # local: as in device_count

    capability = torch.backends.cpu.get_cpu_capability()
    if "AVX512" not in capability and "AMX" not in capability:
        return False, f"torch's CPU kernels run at {capability}, without native bf16"
    isa = os.environ.get("DNNL_MAX_CPU_ISA", "").strip().upper()
    if isa and isa not in BF16_ISAS:
        return False, f"DNNL_MAX_CPU_ISA={isa} holds oneDNN below native bf16"
    flags = [
        name
        for name, probe in (("amx_bf16", "_is_amx_tile_supported"), ("avx512_bf16", "_is_avx512_bf16_supported"))
        # torch's own probe where it has one; torch 2.4 and older have neither (2.12 has both): the kernel's
        # CPU flags instead, which torch's probes read too (through cpuinfo). Drop the fallback
        # once the torch floor has both probes
        if (getattr(torch.cpu, probe)() if hasattr(torch.cpu, probe) else name in linux_cpu_flags())
    ]
    if not flags:
        return False, "this CPU has neither avx512_bf16 nor amx_bf16: bf16 would be emulated"
    return True, f"this CPU computes bf16 natively ({flags[0]})"


def linux_cpu_flags(path: str = "/proc/cpuinfo") -> frozenset:
    """The CPU's feature flags as the Linux kernel lists them (``flags`` in /proc/cpuinfo); empty
    where that file is missing or unreadable (not Linux): then no flag is assumed."""
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def cpu_precision() -> Tuple[str, str]:
    """``precision: auto`` on the CPU: ``bf16-mixed`` where bf16 is native, else ``32``; and why.
    The loss itself stays float32 either way (:class:`mvssl_plugin.methods.base.MultiViewMethod`)."""
    native, why = cpu_bf16_native()
    return ("bf16-mixed" if native else "32"), why


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask: a container's or taskset's share)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def plan_cpu_threads(cores: int, processes: int, workers: int) -> Tuple[int, int]:
    """(torch intra-op threads, loader workers) per process for a CPU run: each process an
    equal share of the cores (torch's default gives every process all of them), and no more
    loader workers than that share.

    Why the share and not fewer threads: with OpenMP's passive wait where loader workers
    share the cores (:func:`openmp_wait_policy`), the whole share was fastest both on a quiet
    2-core machine and beside other work (figures: docs/hardware.md)."""
    share = max(1, cores // max(1, processes))
    return share, min(workers, share)


def openmp_wait_policy(cfg: DictConfig) -> str | None:
    """``PASSIVE`` for a run whose loader workers share the cores with torch's threads, else
    None (OpenMP's default, spinning). Must be in the environment before torch is imported
    (OpenMP reads it once): the entry points set it before the flow starts.

    Why: torch's OpenMP threads spin between operations; beside busy loader workers, or other
    work on a small machine, they wait on each other instead of computing. Passive threads sped
    up a 2-core run with loader workers and slowed the in-memory format (no workers), which
    keeps the default (figures: docs/hardware.md)."""
    workers = select(cfg, "data.num_workers", 0)
    uses_workers = is_int(workers) and workers > 0 and select(cfg, "data.format", "image_folder") != "memory"
    return "PASSIVE" if uses_workers else None


def set_cpu_threads(cfg: DictConfig, processes: int) -> list[str]:
    """Applies :func:`plan_cpu_threads` (``performance.cpu_threads: auto``, the default) or the
    number given, unless ``OMP_NUM_THREADS`` says otherwise; records the choice in the config
    (so in args.json). Returns the notices to print."""
    import torch  # local: as in device_count

    notices = []
    requested = select(cfg, "performance.cpu_threads", AUTO)
    if requested != AUTO and not (is_int(requested) and requested >= 1):
        raise ConfigError(f"performance.cpu_threads={requested!r}: use auto or an integer >= 1")
    workers = int(select(cfg, "data.num_workers", 0) or 0)
    threads, capped = plan_cpu_threads(usable_cores(), processes, workers)
    if capped < workers:
        cfg.data.num_workers = capped
        notices.append(
            f"data.num_workers={workers} on {usable_cores()} CPU cores for {processes} process(es): "
            f"using {capped} loader worker(s): more processes than cores only wait on each other"
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
