"""CPU threads: torch's defaults against the plugin's plan, same run, same machine.

    python benchmarks/bench_threads.py [--steps 18] [--rounds 2] [--load 0 1] [--format image_folder]

Runs ``main_pretrain.py --config-name mabt_cifar_cpu.yaml`` (real CIFAR-10 JPEGs from
../shared/data/cifar10 or CIFAR10_DIR, else generated images; 2 loader workers) for
``--steps`` training steps, no validation, the settings alternated in each round so that all
see the same machine:

* ``before``: torch's default threads (one per core) spinning between operations
  (``OMP_WAIT_POLICY=ACTIVE``, OpenMP's default): what every CPU run did before the plan;
* ``one thread``: ``performance.cpu_threads=1``, spinning;
* ``plan``: what a run does now: ``performance.cpu_threads=auto`` (config/hardware.py
  ``plan_cpu_threads``) with the entry point's passive wait (``mvssl_plugin/cli/__init__.py``).

``--load N`` adds N processes that keep one core busy each during the runs, as other work on a
shared machine does. Prints each run's training seconds (metrics.csv) and the ratios to
``before``, per round.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def burn() -> None:
    while True:
        pass


def data_paths(tmp: Path) -> tuple[str, str]:
    root = Path(os.environ.get("CIFAR10_DIR", REPO.parent / "shared" / "data" / "cifar10"))
    if (root / "train").is_dir():
        return str(root / "train"), str(root / "test")
    from mvssl_plugin.synthetic import write_image_folder

    return str(write_image_folder(tmp / "train", classes=10, per_class=300)), str(tmp / "train")


def run(setting: str, threads: str, steps: int, train: str, out: Path, wait: str, data_format: str) -> float:
    args = [
        sys.executable,
        str(REPO / "main_pretrain.py"),
        "--config-name",
        "mabt_cifar_cpu.yaml",
        f"data.train_path={train}",
        "data.val_path=null",
        f"checkpoint.dir={out / setting}",
        "auto_resume.enabled=false",
        "max_epochs=1",
        f"+limit_train_batches={steps}",
        f"+performance.cpu_threads={threads}",
        "wandb.enabled=false",
        f"data.format={data_format}",
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    if wait:
        env["OMP_WAIT_POLICY"] = wait
    result = subprocess.run(args, cwd=out, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{setting} failed:\n{result.stderr[-3000:]}")
    (metrics,) = (out / setting).glob("*/*/metrics.csv")
    import csv

    with open(metrics) as handle:
        (row,) = list(csv.DictReader(handle))
    metrics.parent.rename(out / f"done-{setting}-{time.time_ns()}")  # out of the next run's glob
    return float(row["train_seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=18)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--load", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--format", default="image_folder", help="data.format of the runs")
    args = parser.parse_args()
    import torch

    default_threads = torch.get_num_threads()
    tmp = Path(tempfile.mkdtemp())
    train, _ = data_paths(tmp)
    cores = len(os.sched_getaffinity(0))
    print(f"torch {torch.__version__}; {cores} usable cores; torch's default: {default_threads} threads; data {train}")
    print(f"data.format={args.format}")
    print("| busy processes | round | before s | one thread s | plan s | one thread / before | plan / before |")
    print("|---|---|---|---|---|---|---|")
    settings = [("before", str(default_threads), "ACTIVE"), ("one", "1", "ACTIVE"), ("plan", "auto", "")]
    for load in args.load:
        burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(load)]
        for process in burners:
            process.start()
        try:
            for r in range(args.rounds):
                before, one, plan = (run(*s, args.steps, train, tmp, wait, args.format) for *s, wait in settings)
                print(
                    f"| {load} | {r + 1} | {before:.1f} | {one:.1f} | {plan:.1f} "
                    f"| {one / before:.2f} | {plan / before:.2f} |",
                    flush=True,
                )
        finally:
            for process in burners:
                process.terminate()


if __name__ == "__main__":
    main()
