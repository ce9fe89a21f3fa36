"""Where the speedrun recipe's CPU training step goes: its FLOPs by layer type, the FLOP/s it
achieves against this CPU's peak for the precision it trains in (the arithmetic shown), and which
oneDNN kernel runs each convolution, forward and backward.

    python benchmarks/step_accounting.py [--steps 20] [--no-kernels] [--recipe speedrun_cpu.yaml] [--set KEY=VALUE ...]
    python benchmarks/step_accounting.py --against-compiled [--recipe speedrun_cpu.yaml]

The step is the recipe's model alone (``speedrun_mabt_cpu.yaml``: 2 views of 128 CIFAR images at 32 px
through the width-16 ResNet-18 and the d = 256 projector, channels-last, the recipe's precision
on this CPU), forward, a stand-in loss, backward and Adam, timed as the median of ``--steps``
after 3 warm-up steps: the part of a training step that FLOPs describe. FLOPs are counted by
``torch.utils.flop_counter`` (convolutions and matrix products; BatchNorm, ReLU and Adam are
memory-bound and not counted); the operators' own time under ``torch.profiler`` shows what those
take. The kernels come from one step run again in a child process with
``ONEDNN_VERBOSE=1``. ``--against-compiled`` sets the eager step beside the same step with
``performance.compile`` (its warm-up compiles it first): both timed in alternation, then each
profiled, its own time grouped by what it does (``CATEGORIES``), to say whether compiling removes
the memory-bound BatchNorm, ReLU and adds or something else. Results for the record:
``results/step_accounting/``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple

REPO = Path(__file__).resolve().parents[1]
#: FLOPs per cycle per core of one FMA-capable vector pipe pair, by what the CPU has (see ``peak``)
VERBOSE_CONV = re.compile(r"exec,cpu,convolution,([^,]+),([^,]+),.*,([^,]+),([\d.]+)$")
#: oneDNN's problem descriptor of a 2-D convolution: batch, groups, channels, sides, kernel, stride
CONV_SHAPE = re.compile(r"mb(\d+)(?:g(\d+))?_ic(\d+)oc(\d+)_ih\d+oh(\d+)kh(\d+)sh(\d+).*_iw\d+ow(\d+)kw(\d+)")


def cpu_facts() -> Dict[str, object]:
    info: Dict[str, str] = {}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        key, _, value = line.partition(":")
        info.setdefault(key.strip(), value.strip())
    flags = set(info.get("flags", "").split())
    held = os.environ.get("DNNL_MAX_CPU_ISA", "").strip().upper()
    if held.startswith("AVX2"):  # the CPU held to AVX2, as make test's rerun does: count its AVX2 peak
        flags = {f for f in flags if not f.startswith(("avx512", "amx"))}
    return {
        "held": held,
        "model": info.get("model name", "?"),
        "vendor": info.get("vendor_id", "?"),
        "family": int(info.get("cpu family", "0") or 0),
        "mhz": float(info.get("cpu MHz", "0") or 0),
        "flags": flags,
        "cores": len(os.sched_getaffinity(0)),
    }


def peak(facts: Dict[str, object]) -> Tuple[float, float, str]:
    """(fp32 FLOP/s, bf16 FLOP/s, the arithmetic) at the reported clock, all cores.

    Per core and cycle: two FMA pipes x lanes x 2 (multiply and add). AVX-512 on Intel server
    cores and AMD Zen 5 (family 26): 2 x 16 x 2 = 64 fp32; Zen 4 (family 25) runs 512-bit
    instructions on 256-bit pipes: 32; AVX2 only: 2 x 8 x 2 = 32. bf16 dot products
    (``avx512_bf16``, VDPBF16PS) do twice the fp32 rate; AMX (``amx_bf16``) 1024 bf16 FLOPs per
    cycle per core (one TMUL: 16 x 16 x 32 x 2 per 16 cycles)."""
    flags, family, amd = facts["flags"], facts["family"], facts["vendor"] == "AuthenticAMD"
    if "avx512f" in flags:
        fp32 = 32 if (amd and family < 26) else 64
    elif "avx2" in flags:
        fp32 = 32
    else:
        fp32 = 16
    bf16 = 1024 if "amx_bf16" in flags else (2 * fp32 if "avx512_bf16" in flags else fp32)
    hz, cores = facts["mhz"] * 1e6, facts["cores"]
    how = (
        f"{cores} cores x {facts['mhz']:.0f} MHz (/proc/cpuinfo: in a VM often the nominal clock; a share "
        f"above 100% below means the cores ran faster) x {fp32} fp32 FLOP/cycle = "
        f"{cores * hz * fp32 / 1e9:.0f} GFLOP/s; bf16 {bf16} FLOP/cycle = {cores * hz * bf16 / 1e9:.0f} GFLOP/s"
    )
    return cores * hz * fp32, cores * hz * bf16, how


def build(overrides: List[str], recipe: str = "speedrun_mabt_cpu.yaml"):
    """The recipe's method on the CPU, in its precision and memory format, and its precision."""
    import contextlib
    import io

    import torch

    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.train.pretrain import build_pretrain_model

    with contextlib.redirect_stdout(io.StringIO()):
        cfg, model = build_pretrain_model(
            compose_recipe(recipe, "pretrain", ["data.val_path=null", "epoch_knn.enabled=false", *overrides])
        )
    return cfg, model.to(memory_format=torch.channels_last), "bf16" in str(cfg.precision)


def one_step(model, views, optimizer, bf16: bool) -> None:
    import torch

    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        z = torch.cat([model.projector(model.backbone(v)) for v in views])
        loss = z.float().pow(2).mean()  # a stand-in for the loss: its FLOPs are O(N d^2), negligible here
    loss.backward()
    optimizer.step()


class RecipeStep(NamedTuple):
    """The recipe's model with its views and Adam: what every measurement here steps."""

    cfg: Any
    model: Any
    views: List[Any]
    optimizer: Any
    bf16: bool

    def __call__(self) -> None:
        one_step(self.model, self.views, self.optimizer, self.bf16)


def recipe_step(overrides: Sequence[str] = (), recipe: str = "speedrun_mabt_cpu.yaml") -> RecipeStep:
    """The recipe's model, random views of its batch and its Adam (fused where this torch can on the
    CPU, as a run's is: ``config.hardware.choose_optimizer_path``; torch < 2.4 refuses it), built
    once for every measurement of a sitting."""
    import torch

    from mvssl_plugin.config.hardware import fused_on_cpu

    cfg, model, bf16 = build(list(overrides), recipe)
    views = [
        torch.randn(int(cfg.optimizer.batch_size), 3, 32, 32).contiguous(memory_format=torch.channels_last)
        for _ in range(int(cfg.data.num_views))
    ]
    params = list(model.backbone.parameters()) + list(model.projector.parameters())
    optimizer = torch.optim.Adam(params, fused=True) if fused_on_cpu("adam") else torch.optim.Adam(params)
    model.train()
    return RecipeStep(cfg, model, views, optimizer, bf16)


def flops_by_op(step: RecipeStep) -> Dict[str, int]:
    """FLOPs of one model step (forward and backward) by aten operator, as torch counts them."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        step()
    return {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}


def account(step: RecipeStep, steps: int) -> Dict[str, object]:
    by_op = flops_by_op(step)
    for _ in range(3):
        step()
    times = []
    for _ in range(steps):
        began = time.perf_counter()
        step()
        times.append(time.perf_counter() - began)
    batch = int(step.cfg.optimizer.batch_size)
    return {
        "by_op": by_op,
        "step": statistics.median(times),
        "bf16": step.bf16,
        "batch": batch,
        "views": len(step.views),
    }


def own_times(step: RecipeStep, steps: int) -> List[Tuple[str, float]]:
    """(profiler name, its own milliseconds a step) of every operator over ``steps`` steps under
    torch.profiler, after 3 warm-up steps."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    return [(e.key, e.self_cpu_time_total / 1000 / steps) for e in prof.key_averages()]


def operators(step: RecipeStep, steps: int = 5, top: int = 8) -> List[Tuple[str, float]]:
    """(aten operator, its own milliseconds a step) of the model step under torch.profiler, the
    ``top`` costliest: where the step goes besides the convolutions (BatchNorm, ReLU, the adds),
    which matters once AMX makes the convolutions fast."""
    own = [(key, ms) for key, ms in own_times(step, steps) if key.startswith("aten::")]
    return sorted(own, key=lambda kv: -kv[1])[:top]


#: what an operator of the step does, by words of its profiler name (the first that matches);
#: the compiled step's fused kernels run inside "CompiledFunction" / "Torch-Compiled Region"
CATEGORIES = (
    ("convolutions", ("convolution",)),
    ("BatchNorm", ("batch_norm",)),
    ("ReLU", ("relu", "threshold")),
    ("matrix products (projector)", ("addmm", "aten::mm", "aten::bmm", "linear")),
    ("Adam", ("adam",)),
    ("compiled code (fused kernels, guards)", ("compiled", "graph_", "cpp_fused", "inductor", "dynamo")),
    (
        "adds, copies and other elementwise",
        ("add", "copy", "mul", "fill", "zero", "clone", "to_copy", "cat", "pow", "mean", "sum", "div"),
    ),
)


def category(name: str) -> str:
    """The ``CATEGORIES`` entry an operator's profiler name falls in ("other" if none)."""
    lower = name.lower()
    return next((label for label, words in CATEGORIES if any(w in lower for w in words)), "other")


def by_category(step: RecipeStep, steps: int = 5) -> Dict[str, float]:
    """Milliseconds a step of every operator's own time under torch.profiler, by ``category``."""
    totals: Dict[str, float] = defaultdict(float)
    for key, ms in own_times(step, steps):
        totals[category(key)] += ms
    return dict(totals)


def against_compiled(recipe: str, rounds: int) -> None:
    """The eager and the compiled step of ``recipe``, timed alternately (medians), then profiled."""
    eager = recipe_step([], recipe)
    began = time.perf_counter()
    compiled = recipe_step(["++performance.compile=true"], recipe)
    for _ in range(3):  # compiles on the first call (and again where a guard fails)
        compiled()
    print(f"compiling and 3 warm-up steps: {time.perf_counter() - began:.1f} s")
    times: Dict[str, List[float]] = {"eager": [], "compiled": []}
    for _ in range(rounds):
        for name, step in (("eager", eager), ("compiled", compiled)):
            began = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - began)
    median = {name: statistics.median(t) for name, t in times.items()}
    print(
        f"model step, median of {rounds} alternating: eager {median['eager'] * 1000:.1f} ms, compiled "
        f"{median['compiled'] * 1000:.1f} ms ({median['compiled'] / median['eager']:.2f}x)\n"
    )
    parts = {"eager": by_category(eager), "compiled": by_category(compiled)}
    print("| what (torch.profiler, own time) | eager ms a step | compiled ms a step |")
    print("|---|---|---|")
    for label in sorted(set(parts["eager"]) | set(parts["compiled"]), key=lambda k: -parts["eager"].get(k, 0.0)):
        print(f"| {label} | {parts['eager'].get(label, 0.0):.1f} | {parts['compiled'].get(label, 0.0):.1f} |")
    print(f"| all | {sum(parts['eager'].values()):.1f} | {sum(parts['compiled'].values()):.1f} |")


def adam_paths(step: RecipeStep, rounds: int = 30) -> Dict[str, float]:
    """Median milliseconds of Adam's step alone over the recipe's parameters (random gradients), per
    implementation: torch's loop over tensors (its CPU default), ``foreach`` and ``fused`` (where this
    torch has it on the CPU), interleaved."""
    import torch

    from mvssl_plugin.config.hardware import fused_on_cpu

    params = list(step.model.backbone.parameters()) + list(step.model.projector.parameters())
    for p in params:
        p.grad = torch.randn_like(p)
    flags = {"loop": {"foreach": False}, "foreach": {"foreach": True}}
    if fused_on_cpu("adam"):
        flags["fused"] = {"fused": True}
    optimizers = {name: torch.optim.Adam(params, lr=1e-9, **kw) for name, kw in flags.items()}
    times: Dict[str, List[float]] = {name: [] for name in optimizers}
    for _ in range(rounds):
        for name, optimizer in optimizers.items():
            began = time.perf_counter()
            optimizer.step()
            times[name].append(time.perf_counter() - began)
    return {name: statistics.median(t) * 1000 for name, t in times.items()}


def kernels(
    recipe: str = "speedrun_mabt_cpu.yaml", overrides: Sequence[str] = ()
) -> Dict[Tuple[str, str, str], List[float]]:
    """(pass, oneDNN implementation, problem descriptor) -> the milliseconds of each call, from one
    step of ``recipe``'s model (with ``overrides``) in a child."""
    env = {**os.environ, "ONEDNN_VERBOSE": "1"}
    code = (
        "import sys; sys.argv = ['x']; import step_accounting as s\n"
        f"step = s.recipe_step({list(overrides)!r}, {recipe!r})\n"
        "step()\n"
        "print('=== measured step', flush=True)\n"
        "step()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env={**env, "PYTHONPATH": str(REPO / "benchmarks")},
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    found: Dict[Tuple[str, str, str], List[float]] = defaultdict(list)
    for line in out.split("=== measured step", 1)[-1].splitlines():
        match = VERBOSE_CONV.search(line)
        if match:
            found[(match.group(2), match.group(1), match.group(3))].append(float(match.group(4)))
    return found


def conv_flops(shape: str) -> Tuple[str, float]:
    """(a layer's label, its FLOPs in one pass) from oneDNN's descriptor: 2 x batch x in x out
    channels (per group) x output pixels x kernel area; the same for forward, data and weights."""
    match = CONV_SHAPE.search(shape)
    if match is None:
        return shape, 0.0
    mb, g, ic, oc, oh, kh, sh, ow, kw = (int(x) if x else 1 for x in match.groups())
    label = f"{ic}->{oc} ch, {kh}x{kw}/{sh}, {oh} px out"
    return label, 2.0 * mb * (ic // g) * oc * oh * ow * kh * kw


def by_layer(found: Dict[Tuple[str, str, str], List[float]]) -> Dict[str, Dict[str, List[float]]]:
    """layer label -> pass -> [ms, FLOPs] summed over the step's calls."""
    rows: Dict[str, Dict[str, List[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    for (kind, _, shape), ms in found.items():
        label, flops = conv_flops(shape)
        rows[label][kind][0] += sum(ms)
        rows[label][kind][1] += flops * len(ms)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--no-kernels", action="store_true", help="skip the ONEDNN_VERBOSE pass")
    parser.add_argument("--recipe", default="speedrun_mabt_cpu.yaml")
    parser.add_argument("--against-compiled", action="store_true", help="the eager step beside the compiled one")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", help="overrides of the recipe's model, "
                        "e.g. ++backbone.kwargs.first_stage_width=32")  # fmt: skip
    args = parser.parse_args()
    import torch

    facts = cpu_facts()
    if args.against_compiled:
        print(f"# {args.recipe}'s step eager and compiled on {facts['model']} (family {facts['family']}), "
              f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")  # fmt: skip
        against_compiled(args.recipe, args.steps)
        return

    fp32_peak, bf16_peak, how = peak(facts)
    step = recipe_step(args.set, args.recipe)
    found = account(step, args.steps)
    total = sum(found["by_op"].values())
    precision = "bf16" if found["bf16"] else "fp32"
    top = bf16_peak if found["bf16"] else fp32_peak
    isa = torch.backends.cpu.get_cpu_capability()
    print(f"# The speedrun step on {facts['model']} (family {facts['family']}), torch {torch.__version__}, ", end="")
    held = f", oneDNN held to DNNL_MAX_CPU_ISA={facts['held']}" if facts["held"] else ""
    print(
        f"{torch.get_num_threads()} threads, {precision}, ATen {isa}{held}"
        + (f"; with {' '.join(args.set)}" if args.set else "")
    )
    print(f"\n{found['views']} views x {found['batch']} images at 32 px; peak: {how}\n")
    print("| op | GFLOP per step | share |")
    print("|---|---|---|")
    for op, n in sorted(found["by_op"].items(), key=lambda kv: -kv[1]):
        print(f"| {op} | {n / 1e9:.2f} | {n / total:.0%} |")
    achieved = total / found["step"]
    print(f"| all counted | {total / 1e9:.2f} | 100% |")
    print(
        f"\nmodel step (forward, backward, Adam; no data, no Lightning): {found['step'] * 1000:.1f} ms median of "
        f"{args.steps}; {achieved / 1e9:.1f} GFLOP/s achieved = {achieved / top:.1%} of the {precision} peak "
        f"({top / 1e9:.0f} GFLOP/s)"
    )
    ops = operators(step)
    print("\n| operator (torch.profiler, its own time) | ms a step | share of the model step |")
    print("|---|---|---|")
    for name, ms in ops:
        print(f"| {name} | {ms:.1f} | {ms / 1000 / found['step']:.0%} |")
    paths = adam_paths(step)
    print("\nAdam's step alone (median ms of 30, interleaved): " + ", ".join(f"{k} {v:.2f}" for k, v in paths.items()))
    if args.no_kernels:
        return
    calls = kernels(args.recipe, args.set)
    per_kernel: Dict[Tuple[str, str], List[float]] = defaultdict(list)
    for (kind, impl, _), ms in calls.items():
        per_kernel[(kind, impl)] += ms
    print("\n| pass | oneDNN convolution kernel | calls | ms in one step |")
    print("|---|---|---|---|")
    for (kind, impl), ms in sorted(per_kernel.items(), key=lambda kv: -sum(kv[1])):
        print(f"| {kind} | {impl} | {len(ms)} | {sum(ms):.1f} |")
    passes = ("forward_training", "backward_data", "backward_weights")
    print(f"\nEach convolution shape's achieved GFLOP/s per pass (its share of the {top / 1e9:.0f} GFLOP/s peak):\n")
    print("| layer | ms in one step | " + " | ".join(passes) + " |")
    print("|---|---|" + "---|" * len(passes))
    layers = by_layer(calls)
    for label, kinds in sorted(layers.items(), key=lambda kv: -sum(v[0] for v in kv[1].values())):
        cells = []
        for kind in passes:
            ms, flops = kinds.get(kind, [0.0, 0.0])
            cells.append(f"{flops / ms / 1e6:.0f} ({flops / ms / 1e6 / (top / 1e9):.0%})" if ms else "-")
        print(f"| {label} | {sum(v[0] for v in kinds.values()):.1f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
