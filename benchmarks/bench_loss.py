"""Micro-benchmark: multi-view loss cost in m and d, and the training step per-view vs fused.

    python benchmarks/bench_loss.py [--batch 128] [--repeats 3] [--backbone narrow_resnet18]

Part 1 times forward+backward of the losses for m in {2, 4, 8, 16} at d in {256, 8192}
(objective leave_one_out with redundancy per_view and mean_embedding; objective fastssl,
the authors' released loss, at m in {2, 4, 8}), next to solo-learn's two-view
``barlow_loss_func``/``vicreg_loss_func`` (ratios are to solo-learn's at m = 2 and the
same d, measured in the same run). Part 2 times one
training step (forward + backward, no optimizer) of ``mabt`` at m = 4, per-view and fused,
against solo-learn's ``barlow_twins`` at m = 2, built from the CIFAR recipes. Part 3
(``--memory-format``) times the backbone's forward+backward on the CPU, contiguous against
channels-last, for ResNet-18 base widths 8, 16 and 64: what ``train/trainer.py``'s CPU rule
for channels-last rests on. Medians.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


#: Part 1 rows per m: (label, objective, redundancy); fastssl is the authors' released loss.
LOSS_MODES = (
    ("per_view", "leave_one_out", "per_view"),
    ("mean_embedding", "leave_one_out", "mean_embedding"),
    ("fastssl", "fastssl", "per_view"),
)
#: the view counts the release was run with
FASTSSL_VIEWS = (2, 4, 8)


def free_memory_bytes() -> int:
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def bench_losses(batch: int, repeats: int) -> None:
    from solo.losses.barlow import barlow_loss_func
    from solo.losses.vicreg import vicreg_loss_func

    from mvssl_plugin.losses import multiview_barlow_loss, multiview_vicreg_loss

    print(f"\n## Loss forward+backward, batch N={batch}, {torch.get_num_threads()} threads (median of {repeats})")
    print("| loss | d | m | mode | ms | ms / view | x solo-learn m=2 |")
    print("|---|---|---|---|---|---|---|")
    pairs = [("barlow", multiview_barlow_loss, barlow_loss_func), ("vicreg", multiview_vicreg_loss, vicreg_loss_func)]
    for name, ours, solo in pairs:
        for d in (256, 8192):
            z2 = [torch.randn(batch, d, requires_grad=True) for _ in range(2)]
            base = median_seconds(lambda: solo(*z2).backward(), repeats)
            print(f"| solo-learn {name} | {d} | 2 | - | {base * 1e3:.1f} | {base * 1e3 / 2:.1f} | 1.00 |")
            for m in (2, 4, 8, 16):
                for mode, objective, redundancy in LOSS_MODES:
                    if objective == "fastssl" and m not in FASTSSL_VIEWS:
                        continue
                    # D x D matrices alive with their gradients: leave_one_out per_view keeps m,
                    # fastssl VICReg 2 m (covariances of each view and of its target), the others ~2
                    matrices = m if mode == "per_view" else 2 * m if (mode, name) == ("fastssl", "vicreg") else 2
                    need = matrices * d * d * 4 * 5
                    if need > 0.6 * free_memory_bytes():
                        print(f"| {name} | {d} | {m} | {mode} | skipped: needs ~{need / 2**30:.0f} GiB | | |")
                        continue
                    z = [torch.randn(batch, d, requires_grad=True) for _ in range(m)]

                    def run() -> None:
                        ours(z, redundancy=redundancy, objective=objective).backward()

                    t = median_seconds(run, repeats)
                    print(f"| {name} | {d} | {m} | {mode} | {t * 1e3:.1f} | {t * 1e3 / m:.1f} | {t / base:.2f} |")


def bench_steps(batch: int, repeats: int, backbone: str, device: torch.device) -> None:
    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.synthetic import tiny_overrides
    from mvssl_plugin.synthetic import write_image_folder as make_image_folder
    from mvssl_plugin.train.pretrain import build_pretrain_model

    tmp = Path(tempfile.mkdtemp())
    data = {
        "train": str(make_image_folder(tmp / "train", per_class=batch)),
        "test": str(make_image_folder(tmp / "test")),
    }
    # (label, recipe, overrides, channels_last, autocast dtype)
    runs = [
        ("solo-learn barlow_twins, m=2, d=256", "mabt_cifar.yaml", ["method=barlow_twins", "data.num_views=2"]),
        ("mabt m=2 per-view, d=256", "mabt_cifar.yaml", ["data.num_views=2"]),
        ("mabt m=4 per-view, d=256", "mabt_cifar.yaml", []),
        # contiguous throughout: solo-learn converts a method's inputs to channels-last unless
        # its config disables it, so the model alone kept contiguous would mix both layouts
        ("mabt m=4 per-view, d=256, contiguous", "mabt_cifar.yaml", ["performance.disable_channel_last=true"], False),
        ("mabt m=4 fused, d=256", "mabt_cifar.yaml", ["method_kwargs.fused_forward=true"]),
        (
            "mabt m=4 fused + torch.compile, d=256",
            "mabt_cifar.yaml",
            ["method_kwargs.fused_forward=true", "performance.compile=true"],
        ),
        ("mabt m=4 fastssl (fused, paper projector), d=256", "mabt_paper_views_cifar.yaml", []),
        (
            "solo-learn barlow_twins, m=2, d=8192 (baseline recipe)",
            "mabt_cifar_2views_d8192.yaml",
            ["method=barlow_twins"],
        ),
    ]
    if device.type == "cuda":
        runs += [
            ("mabt m=4 per-view, d=256, bf16 autocast", "mabt_cifar.yaml", [], True, torch.bfloat16),
            (
                "mabt m=4 fused, d=256, bf16 autocast",
                "mabt_cifar.yaml",
                ["method_kwargs.fused_forward=true"],
                True,
                torch.bfloat16,
            ),
        ]
    print(f"\n## Training step (forward+backward, no optimizer), backbone {backbone}, batch {batch}, {device}")
    print("| run | s / step | views / s | step x solo-learn m=2 |")
    print("|---|---|---|---|")
    base = None
    for label, recipe, extra, *options in runs:
        channels_last, dtype = [*options, *(True, None)[len(options) :]]
        settings = {"backbone.name": backbone, "optimizer.batch_size": batch, "precision": 32, "strategy": "auto"}
        overrides = [
            o
            for o in tiny_overrides(data, tmp / "runs", **settings)
            if not o.startswith(("+backbone.kwargs.width", "method_kwargs.proj_output_dim", "accelerator"))
        ]
        if backbone == "narrow_resnet18":
            overrides.append("+backbone.kwargs.width=16")
        overrides.append(f"accelerator={'gpu' if device.type == 'cuda' else 'cpu'}")
        with contextlib.redirect_stdout(io.StringIO()):  # the config notices would split the table
            _, model = build_pretrain_model(compose_recipe(recipe, "pretrain", overrides + extra))
        model = model.to(device)
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
        m = model.num_crops
        views = [torch.randn(batch, 3, 32, 32, device=device) for _ in range(m)]
        data_batch = [torch.arange(batch, device=device), views, torch.randint(0, 10, (batch,), device=device)]

        def step():
            model.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                loss = model.training_step(data_batch, 0)
            loss.backward()
            if device.type == "cuda":
                torch.cuda.synchronize()

        t = median_seconds(step, repeats)
        base = base or t
        print(f"| {label} | {t:.3f} | {m * batch / t:.0f} | {t / base:.2f} |", flush=True)


def bench_memory_format(batch: int, repeats: int, widths=(8, 16, 64)) -> None:
    """Backbone forward+backward on the CPU, contiguous vs channels-last, alternated in
    one loop so that both see the same machine load."""
    from mvssl_plugin.backbones.narrow_resnet import NarrowResNet18

    threads = torch.get_num_threads()
    print(f"\n## Backbone step on the CPU, contiguous vs channels-last, batch {batch}, {threads} threads")
    print("| width | contiguous s | channels-last s | channels-last / contiguous |")
    print("|---|---|---|---|")
    x = torch.randn(batch, 3, 32, 32)
    for width in widths:
        torch.manual_seed(0)
        nets = {"contiguous": NarrowResNet18(width, small_input=True)}
        nets["channels_last"] = NarrowResNet18(width, small_input=True).to(memory_format=torch.channels_last)
        inputs = {"contiguous": x, "channels_last": x.contiguous(memory_format=torch.channels_last)}
        times = {name: [] for name in nets}
        for _ in range(repeats + 1):  # the first round warms up both
            for name, net in nets.items():
                net.zero_grad(set_to_none=True)
                start = time.perf_counter()
                net(inputs[name]).sum().backward()
                times[name].append(time.perf_counter() - start)
        plain, last = (statistics.median(times[name][1:]) for name in nets)
        print(f"| {width} | {plain:.3f} | {last:.3f} | {last / plain:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backbone", default="narrow_resnet18", help="narrow_resnet18 (CPU) or resnet18")
    parser.add_argument("--skip-losses", action="store_true")
    parser.add_argument("--skip-steps", action="store_true")
    parser.add_argument("--memory-format", action="store_true", help="only part 3: contiguous vs channels-last (CPU)")
    args = parser.parse_args()
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, cuda: {torch.cuda.is_available()}")
    if args.memory_format:
        bench_memory_format(args.batch, args.repeats)
        return
    if not args.skip_losses:
        bench_losses(args.batch, args.repeats)
    if not args.skip_steps:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        bench_steps(args.batch, args.repeats, args.backbone, device)


if __name__ == "__main__":
    main()
