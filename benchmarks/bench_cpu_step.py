"""The whole CPU training step, paired: precision x memory format, torch.compile and Adam's
implementations, as a run trains.

    python benchmarks/bench_cpu_step.py [--steps 12] [--rounds 3] [--views 4 2] [--profile] [--set KEY=VALUE ...]
                                        [--recipe speedrun_mavicreg_cpu.yaml] [--isolate]

Each setting is ``main_pretrain.py --config-name mabt_cifar_cpu.yaml data.format=memory`` (or ``--recipe``)
(real CIFAR-10 JPEGs from ../shared/data/cifar10 or CIFAR10_DIR, 10% of them; width-16
ResNet-18, d = 256, batch 128), its ``--steps`` training steps after 3 warm-up steps timed by
``step_clock.run_setting`` (a step: the views' augmentation, forward, loss, backward and the
optimizer). The settings alternate within each round, each round starting one setting later, so
that all see the same machine; the table gives medians and the ratio of views/s to the first
setting listed (of all: fp32, channels-last, the CPU default before bf16 became one; ``--only
"bf16 channels-last" ...`` compares the candidates with today's bf16 step).

``--set`` adds Hydra overrides to every setting: ``--set data.num_workers=0`` cuts the views on
the main thread, as the speedrun recipes do, instead of the CPU recipe's 2 loader workers.

``--isolate`` times each setting of each round in a fresh process. Measure ``torch.compile`` so:
sharing one process with the eager setting, the compiled step of ``speedrun_mavicreg_cpu.yaml``
timed 0.174-0.180 s against eager's 0.218-0.219; each in its own process, 0.195-0.199 s against
0.220-0.224, which is what the recipe's own run gets (the AMX Xeon, 2026-12-03; docs/performance.md).

The hard views' setting cuts 2m views and trains on each image's m hardest, chosen at 16 px
(``method_kwargs.hard_views``): its step holds the choosing pass and the extra views' cutting.

Beside each median: the model step's FLOPs (forward and backward, counted once per m by
``step_accounting.flops_by_op``; not the hard views' choosing pass) over the whole step's seconds,
and that rate's share of this CPU's peak for the setting's precision (``step_accounting.peak``: the
arithmetic is printed; the clock is /proc/cpuinfo's). Data, loss and Lightning count as time but not
as FLOPs.

``--profile`` prints, per setting, the operators that take the most time over a few steps
(torch.profiler): where a setting gains or loses.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
from pathlib import Path
from typing import Dict, Tuple

REPO = Path(__file__).resolve().parents[1]

from step_accounting import cpu_facts, flops_by_op, peak, recipe_step  # noqa: E402
from step_clock import in_fresh_process, quiet, run_setting  # noqa: E402

#: the setting that cuts 2m views and trains on each image's m hardest (``method_kwargs.hard_views``)
HARD = "bf16 channels-last, the m hardest of 2m views"
#: (label, overrides): what is compared
SETTINGS = (
    ("fp32 channels-last", ["precision=32", "performance.disable_channel_last=false"]),
    ("fp32 contiguous", ["precision=32", "performance.disable_channel_last=true"]),
    ("bf16 channels-last", ["precision=bf16-mixed", "performance.disable_channel_last=false"]),
    ("bf16 contiguous", ["precision=bf16-mixed", "performance.disable_channel_last=true"]),
    # Adam's implementations (the settings above run fused: config.hardware.choose_optimizer_path)
    ("bf16 channels-last, Adam as a loop", ["precision=bf16-mixed", "+optimizer.kwargs.foreach=false"]),
    ("bf16 channels-last, foreach Adam", ["precision=bf16-mixed", "+optimizer.kwargs.foreach=true"]),
    # the backbone's and projector's forward under torch.compile (inductor)
    ("bf16 channels-last, compiled", ["precision=bf16-mixed", "performance.compile=true"]),
    # a wider first stage (issue 94): 16 channels half-fill an AMX tile row of 32 bf16 values
    ("bf16 channels-last, first stage 32 wide", ["precision=bf16-mixed", "+backbone.kwargs.first_stage_width=32"]),
    # hard positive mining (issue 94): 2m views cut, the m hardest trained, chosen at 16 px
    (HARD, ["precision=bf16-mixed", "++method_kwargs.hard_views_side=16"]),
)

#: label: the child's environment, for the runtimes' levers (issue 94); only with --isolate, whose
#: fresh process reads them at start: threads bound to cores, oneDNN held below AMX, an allocator
ENV_SETTINGS: Dict[str, Dict[str, str]] = {
    "bf16 channels-last, threads bound": {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"},
    "bf16 channels-last, oneDNN without AMX": {"DNNL_MAX_CPU_ISA": "AVX512_CORE_BF16"},
}
for _label in ENV_SETTINGS:
    SETTINGS += ((_label, ["precision=bf16-mixed", "performance.disable_channel_last=false"]),)
ALLOCATORS = ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4")
for _path in ALLOCATORS:
    if Path(_path).exists():  # a preloaded allocator where the machine has one
        _label = f"bf16 channels-last, {Path(_path).name.split('.')[0][3:]}"
        ENV_SETTINGS[_label] = {"LD_PRELOAD": _path}
        SETTINGS += ((_label, ["precision=bf16-mixed", "performance.disable_channel_last=false"]),)
        # with compile too: whether the two levers' gains stack
        ENV_SETTINGS[f"{_label}, compiled"] = {"LD_PRELOAD": _path}
        SETTINGS += ((f"{_label}, compiled", ["precision=bf16-mixed", "performance.compile=true"]),)


@functools.lru_cache(maxsize=None)
def model_flops(overrides: Tuple[str, ...], recipe: str) -> int:
    """One model step's FLOPs (forward and backward) for the recipe with these overrides; cached, so
    settings that share a model count it once."""
    return sum(flops_by_op(recipe_step(list(overrides), recipe)).values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--views", type=int, nargs="+", default=[4, 2])
    parser.add_argument("--only", nargs="+", help="labels of the settings to run (default: all)")
    parser.add_argument("--profile", action="store_true", help="one round, operator table per setting")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", help="overrides for every setting")
    parser.add_argument("--recipe", default="mabt_cifar_cpu.yaml", help="the recipe every setting starts from")
    parser.add_argument("--isolate", action="store_true", help="each setting's steps in a fresh process")
    args = parser.parse_args()

    import torch

    quiet()
    from mvssl_plugin.config.hardware import cpu_precision

    isa = torch.backends.cpu.get_cpu_capability()
    print(
        f"torch {torch.__version__}; ATen {isa}; DNNL_MAX_CPU_ISA={os.environ.get('DNNL_MAX_CPU_ISA', '-')}; "
        f"precision auto would pick: {cpu_precision()}; every setting with {args.set or 'the recipe as it is'}"
    )
    fp32_peak, bf16_peak, how = peak(cpu_facts())
    print(f"peak: {how}")
    settings = [s for s in SETTINGS if not args.only or s[0] in args.only]
    out = Path(tempfile.mkdtemp())
    for m in args.views:
        times: dict[str, list[float]] = {label: [] for label, _ in settings}
        for r in range(1 if args.profile else args.rounds):
            # each round starts one setting later: a round's first setting ran slowest in every
            # round of a fixed order (0.244 s against 0.213-0.220 s for the others, 2026-12-02)
            for label, overrides in settings[r % len(settings) :] + settings[: r % len(settings)]:
                if args.profile:
                    print(f"\n### m = {m}, {label}")
                views = [f"data.num_views={2 * m}", f"++method_kwargs.hard_views={m}"] if label == HARD else []
                views = views or [f"data.num_views={m}"]
                setting = (overrides + args.set + views, args.steps, out, args.profile, args.recipe)
                env = ENV_SETTINGS.get(label)
                if env and not args.isolate:
                    raise SystemExit(f"{label!r} sets the runtime's environment: run it with --isolate")
                times[label] += (
                    in_fresh_process(run_setting, *setting, env=env) if args.isolate else run_setting(*setting)
                )
        flops = {  # per setting: a backbone key changes the model's FLOPs
            label: model_flops(
                (*(o for o in overrides if o.lstrip("+").startswith("backbone.")), *args.set, f"data.num_views={m}"),
                args.recipe,
            )
            for label, overrides in settings
        }
        first = flops[settings[0][0]]
        print(f"\n## {args.recipe}, m = {m}, {torch.get_num_threads()} threads, {first / 1e9:.1f} GFLOP a model step "
              f"(the first setting's)")  # fmt: skip
        print("| setting | s / step (median) | views / s | x first setting | GFLOP/s | share of peak |")
        print("|---|---|---|---|---|---|")
        base = None
        for label, overrides in settings:
            step = statistics.median(times[label])
            views = 128 * m / step
            base = base or views
            rate = flops[label] / step
            share = rate / (bf16_peak if "precision=bf16-mixed" in overrides else fp32_peak)
            print(f"| {label} | {step:.3f} | {views:.0f} | {views / base:.2f} | {rate / 1e9:.0f} | {share:.1%} |",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
