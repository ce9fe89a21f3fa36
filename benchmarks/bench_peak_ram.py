"""The memory estimate (mvssl_plugin/peak_ram_estimate.py) against the peak RSS of real training steps.

    python benchmarks/bench_peak_ram.py [--steps 3] [--only N ...]

Each setting runs ``main_pretrain.py`` for ``--steps`` training steps (no validation, no
checkpoint, ``data.num_workers=0``) in a child process on generated images, and reads the
child's peak resident memory from ``os.wait4`` (``ru_maxrss``: what the OOM killer judges;
tracemalloc does not see torch's allocations). Prints a markdown table of measured peak,
estimate and error. CPU only; a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from mvssl_plugin.synthetic import write_image_folder  # noqa: E402

#: (recipe, overrides): narrow and full-width ResNets, 32 to 224 px, 2 to 8 views, small and large d
NARROW = "backbone.name=narrow_resnet18 +backbone.kwargs.width"
SETTINGS = [
    ("mabt_cifar.yaml", f"{NARROW}=16 optimizer.batch_size=8 data.num_views=2"),
    ("mabt_cifar.yaml", f"{NARROW}=16 optimizer.batch_size=128"),
    ("mabt_cifar.yaml", f"{NARROW}=16 optimizer.batch_size=256 data.num_views=2"),
    ("mabt_cifar.yaml", f"{NARROW}=16 optimizer.batch_size=256 data.num_views=8"),
    ("mabt_cifar.yaml", f"{NARROW}=64 optimizer.batch_size=64"),
    ("mabt_cifar.yaml", "optimizer.batch_size=64 data.num_views=2 method_kwargs.proj_output_dim=2048"),
    ("mabt_cifar.yaml", "backbone.name=resnet50 optimizer.batch_size=16 data.num_views=2"),
    ("mabt_stl10.yaml", "optimizer.batch_size=16 data.num_views=2"),
    ("mabt_imagenet100.yaml", "optimizer.batch_size=8 data.num_views=2 data.format=image_folder"),
    ("mabt_cifar.yaml", f"{NARROW}=16 optimizer.batch_size=64 data.num_views=2 method_kwargs.proj_output_dim=8192"),
    ("mavicreg_cifar.yaml", f"{NARROW}=16 optimizer.batch_size=128"),
]
COMMON = (
    "data.val_path=null data.num_workers=0 max_epochs=1 checkpoint.enabled=false auto_resume.enabled=false "
    "accelerator=cpu wandb.enabled=false +num_sanity_val_steps=0"
)


def estimate(recipe: str, overrides: list[str]) -> float:
    """The estimate the entry point compares with free memory, for this config."""
    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.config import adapt_to_hardware, set_crop_counts
    from mvssl_plugin.peak_ram_estimate import estimate_peak
    from mvssl_plugin.train.peak_ram_check import run_shape

    cfg = compose_recipe(recipe, "pretrain", overrides)
    adapt_to_hardware(cfg)
    set_crop_counts(cfg)
    return estimate_peak(run_shape(cfg)).total


def measure(recipe: str, overrides: list[str]) -> tuple[float, float, int]:
    """(peak RSS bytes, seconds, exit status) of the entry point run as a child process."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen(
            [sys.executable, str(REPO / "main_pretrain.py"), "--config-name", recipe, *overrides],
            stdout=subprocess.DEVNULL,
            stderr=errors,
            env=dict(os.environ, PYTHONWARNINGS="ignore"),
        )
        _, wait_status, usage = os.wait4(child.pid, 0)  # this child's own rusage, not the maximum of all
        child.returncode = status = os.waitstatus_to_exitcode(wait_status)
        if status:
            errors.seek(0)
            print(errors.read().decode()[-1500:], file=sys.stderr)
    return usage.ru_maxrss * 1024.0, time.perf_counter() - start, status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--only", type=int, nargs="*", help="setting numbers (1-based)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = write_image_folder(Path(tmp) / "train", classes=4, per_class=80)
        print("| # | recipe | overrides | measured peak GiB | estimate GiB | error | s |")
        print("|---|---|---|---|---|---|---|")
        for number, (recipe, extra) in enumerate(SETTINGS, 1):
            if args.only and number not in args.only:
                continue
            overrides = [
                f"data.train_path={data}",
                *COMMON.split(),
                f"+limit_train_batches={args.steps}",
                *extra.split(),
            ]
            predicted = estimate(recipe, overrides)
            peak, seconds, status = measure(recipe, overrides)
            error = f"{predicted / peak - 1:+.0%}" if status == 0 else f"exit {status}"
            cells = [number, recipe, extra, f"{peak / 2**30:.2f}", f"{predicted / 2**30:.2f}", error, f"{seconds:.0f}"]
            print("| " + " | ".join(map(str, cells)) + " |", flush=True)


if __name__ == "__main__":
    main()
