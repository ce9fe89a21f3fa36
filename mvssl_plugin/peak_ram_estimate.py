"""Peak RAM of a pretraining run (host RAM; GPU memory on a GPU), estimated from its shape
before anything is built. (The in-memory data format is ``data/inmemory/``, another thing.)

Why: a run whose views x batch do not fit dies minutes in (the CPU's OOM killer: exit 137
and no message; a GPU: an out-of-memory traceback after the first steps). The estimate
takes a second's arithmetic, so the entry point can refuse such a run at once and say
which batch would fit.

The model, per process::

    peak = base + parameters x (weights + gradients + optimizer state)
         + batch x sum over views (saved activations per pixel x crop^2 x overhead)
         + projector and loss buffers (Barlow Twins / VICReg: D x D matrices per view)
         + the input batch (and on the CPU the DataLoader's prefetched batches)

Saved activations per input pixel were measured once per backbone with
``torch.autograd.graph.saved_tensors_hooks`` (:data:`ACTIVATION_BYTES_PER_PIXEL`); three
constants (``CPU_BASE``, ``ACTIVATION_OVERHEAD``, ``LOSS_COPIES``) were then fitted to the
peak RSS of three training steps measured in child processes on the CPU
(``benchmarks/bench_peak_ram.py``: ``os.wait4``'s ``ru_maxrss``; 2 cores, torch
2.12.1). Over its 11 settings, 0.98 to 5.1 GiB (narrow ResNet-18 widths 16 and 64,
ResNet-18 and -50, 32 to 224 px, 2 to 8 views, batch 8 to 256, d = 256 to 8192, Barlow
Twins and VICReg), the estimate was within -6% to +5% of the measured peak; the fit was
made on those same settings, so expect more on others. Peak RSS grows with views x batch
(2 x 256, 4 x 128 and 8 x 64 images peak within 7% of each other). DataLoader worker
processes are not in the measure (each adds a few hundred MB, mostly shared pages). GPU
settings are not calibrated (no GPU was available): the same activations, halved under
16-bit mixed precision, with a 1 GiB base for the CUDA context and cuDNN workspaces.
bf16 on a CPU is not calibrated either: its peak was 0.87x the fp32 one in one environment
and 1.58x in another (width-16 ResNet-18, 4 x 64 views; the estimate counts it as fp32).

A run is refused only when :data:`LOW_END` x its estimate is above the memory available:
an estimate up to 18% too high (over three times the worst miss measured) refuses nothing
that fits.
Standard library only (torch is imported to ask a GPU for its free memory).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, Optional, Tuple

GiB = 2**30
#: saved activations of one forward, bytes per image and input pixel, float32
#: (backbone, CIFAR stem?) -> bytes; the narrow ResNet-18 scales with its width (per unit)
ACTIVATION_BYTES_PER_PIXEL: Dict[Tuple[str, bool], float] = {
    ("resnet18", True): 5420.0,  # solo-learn's CIFAR stem (3x3, padding 2: 34 x 34 maps)
    ("resnet18", False): 446.0,
    ("resnet50", True): 29535.0,
    ("resnet50", False): 1716.0,
    ("narrow_resnet18", True): 72.5,  # x width
    ("narrow_resnet18", False): 7.0,  # x width
}
#: backbone parameters and feature dimension (the narrow ResNet-18's scale with width^2 / width)
BACKBONE_PARAMS: Dict[str, Tuple[float, int]] = {
    "resnet18": (11.18e6, 512),
    "resnet50": (23.51e6, 2048),
    "narrow_resnet18": (11.17e6 / 64**2, 8),  # x width^2, x width
}
#: optimizer state floats per parameter
OPTIMIZER_STATES = {"adam": 2, "adamw": 2, "lars": 1, "sgd": 1}
#: fitted to measured peaks (see the module docstring)
CPU_BASE = 0.97 * GiB  # python + torch + Lightning + solo-learn, the data set listed
GPU_BASE = 1.0 * GiB  # not calibrated: CUDA context, cuDNN / cuBLAS workspaces
ACTIVATION_OVERHEAD = 1.05  # activation gradients, channels-last copies, allocator slack
LOSS_COPIES = 4  # D x D matrices alive per matrix: correlation, its square, two gradients
#: the estimate was at most 5% above a measured peak: a run is refused only when this share
#: of its estimate is above the memory available (room for misses of up to 18%)
LOW_END = 0.85
HALF_PRECISIONS = ("16", "16-mixed", "bf16", "bf16-mixed", "16-true", "bf16-true")


@dataclass(frozen=True)
class RunShape:
    """What sets a pretraining process's memory (one process: batch is per process)."""

    backbone: str
    views: Tuple[Tuple[int, int], ...]  # (crop size, number of views)
    batch_size: int
    proj_hidden_dim: int
    proj_output_dim: int
    width: int = 64  # narrow_resnet18 only
    small_input: bool = True  # the CIFAR stem
    projector_layers: int = 3
    precision: str = "32"
    optimizer: str = "adam"
    loss_matrices: int = 2  # D x D matrices the loss builds (per_view: one per view)
    num_workers: int = 0
    device: str = "cpu"

    @property
    def num_views(self) -> int:
        return sum(n for _, n in self.views)


@dataclass
class PeakEstimate:
    """Bytes by part; ``total`` is the estimated peak."""

    parts: Dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    def describe(self) -> str:
        return ", ".join(f"{name} {gib(v)}" for name, v in self.parts.items() if v >= 0.05 * GiB)


def gib(num_bytes: float) -> str:
    return f"{num_bytes / GiB:.1f} GiB"


def known_backbone(shape: RunShape) -> bool:
    return (shape.backbone, shape.small_input) in ACTIVATION_BYTES_PER_PIXEL


def estimate_peak(shape: RunShape) -> PeakEstimate:
    """Estimated peak memory of one training process (see the module docstring)."""
    half = shape.device == "cuda" and shape.precision in HALF_PRECISIONS
    per_pixel = ACTIVATION_BYTES_PER_PIXEL[(shape.backbone, shape.small_input)]
    params, features = BACKBONE_PARAMS[shape.backbone]
    if shape.backbone == "narrow_resnet18":
        per_pixel, params, features = per_pixel * shape.width, params * shape.width**2, features * shape.width
    hidden, d = shape.proj_hidden_dim, shape.proj_output_dim
    if shape.projector_layers == 3:
        params += features * hidden + hidden * hidden + hidden * d
    else:
        params += features * hidden + hidden * d
    states = OPTIMIZER_STATES.get(shape.optimizer, 2)
    pixels = sum(size * size * n for size, n in shape.views)
    m, b = shape.num_views, shape.batch_size
    activations = b * pixels * per_pixel * ACTIVATION_OVERHEAD * (0.5 if half else 1.0)
    projector = b * m * (features + 3 * hidden * (shape.projector_layers - 1) + 2 * d) * 4 * 2
    batch = b * pixels * 3 * 4
    prefetched = batch * 2 * shape.num_workers if shape.device == "cpu" else batch
    return PeakEstimate(
        {
            "base": GPU_BASE if shape.device == "cuda" else CPU_BASE,
            "parameters": params * 4 * (2 + states),
            "activations": activations,
            "projector": projector,
            "loss": LOSS_COPIES * shape.loss_matrices * d * d * 4,
            "input batches": batch + prefetched,
        }
    )


def largest_batch(shape: RunShape, available: float) -> int:
    """The largest batch whose low-end estimate fits ``available`` bytes (0 if none does)."""
    low, high = 0, max(1, shape.batch_size)
    while LOW_END * estimate_peak(replace(shape, batch_size=high)).total <= available and high < 2**24:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if LOW_END * estimate_peak(replace(shape, batch_size=middle)).total <= available:
            low = middle
        else:
            high = middle
    return low


def largest_views(shape: RunShape, available: float) -> int:
    """The most views (of the first resolution, the others kept) whose low-end estimate fits."""
    (size, count), rest = shape.views[0], shape.views[1:]
    best = 0
    for n in range(1, max(count, 64) + 1):
        if LOW_END * estimate_peak(replace(shape, views=((size, n), *rest))).total > available:
            break
        best = n
    return best


def available_ram() -> int:
    """Bytes of RAM this process may still take: MemAvailable (free + reclaimable cache),
    capped by the cgroup's limit; ``os.sysconf``'s available pages where /proc is missing."""
    available: Optional[int] = None
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if available is None:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
        if limit != "max":
            available = min(available, int(limit) - used)
    except (OSError, ValueError):
        pass
    return max(0, available)


def available_bytes(device: str, index: int = 0) -> int:
    """Free memory of ``device`` (``cpu`` or ``cuda``; GPU ``index``)."""
    if device == "cuda":
        import torch  # local: torch (~3 s) for a GPU's free memory only; this module is pure Python

        free, _ = torch.cuda.mem_get_info(index)
        return int(free)
    return available_ram()
