"""The GPU pairs' step timings: each pair's two settings alternate within every round, so
both see the same machine, and the verdict is their ratio against the pair's target.

    python benchmarks/bench_pairs.py --data <cifar10> --csv pairs.csv --set accelerator=gpu precision=bf16-mixed

| pair | A | B | target |
|---|---|---|---|
| ``bt`` | ``mabt`` m = 2, d = 8192 | solo-learn's ``barlow_twins``, the same recipe | A within 2% of B |
| ``views`` | ``mabt`` m = 4, d = 256 | ``mabt`` m = 2, d = 256 | A at most 2.0x B |
| ``data`` | ``mabt`` m = 4 with ``--format``'s loader | the same step on one fixed batch | A within 5% of B |

A step is timed from one batch's start to the next (``step_clock.run_setting``: the whole
step, the loader's wait included; on a GPU the host runs ahead of the kernels only until the
loss is read back, once a step), over ``--steps`` steps after 3 warm-up steps, on all the
training images (``--fraction``). The medians, their ratio and the verdict go to ``--csv``
with the device, the commit and the clock.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

from step_clock import quiet, run_setting

from mvssl_plugin.provenance import commit

#: name: (recipe, A's overrides, B's overrides, whether B takes a fixed batch, max A / B, what it checks)
PAIRS: Dict[str, tuple] = {
    "bt": (
        "mabt_cifar_2views_d8192.yaml",
        [],
        ["method=barlow_twins"],
        False,
        1.02,
        "mabt m = 2 within 2% of solo-learn's barlow_twins",
    ),
    "views": ("mabt_cifar.yaml", ["data.num_views=4"], ["data.num_views=2"], False, 2.0, "m = 4 at most 2.0x m = 2"),
    "data": ("mabt_cifar.yaml", ["data.num_views=4"], ["data.num_views=4"], True, 1.05, "data wait within 5%"),
}
COLUMNS = ("pair", "a_s_per_step", "b_s_per_step", "ratio", "target", "verdict", "steps", "rounds")
COLUMNS += ("check", "recipe", "a", "b", "overrides", "device", "commit", "date")


def device_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"cpu ({os.cpu_count()} cores)"


def time_pair(name: str, common: List[str], fmt: str, steps: int, rounds: int, fraction: float, out: Path) -> dict:
    """Both settings of one pair, alternating within each round; the medians and the verdict."""
    recipe, a, b, fixed, target, check = PAIRS[name]
    a, b = a + [f"data.format={fmt}"] + common, b + [f"data.format={fmt}"] + common
    times: Dict[str, List[float]] = {"a": [], "b": []}
    start = time.perf_counter()
    for round_ in range(rounds):
        times["a"] += run_setting(a, steps, out, False, recipe=recipe, fraction=fraction)
        times["b"] += run_setting(b, steps, out, False, recipe=recipe, fraction=fraction, fixed_batch=fixed)
        print(f"bench_pairs: {name}, round {round_ + 1}/{rounds} ({time.perf_counter() - start:.0f} s)", flush=True)
    step_a, step_b = statistics.median(times["a"]), statistics.median(times["b"])
    ratio = step_a / step_b
    return {
        "pair": name,
        "a_s_per_step": round(step_a, 5),
        "b_s_per_step": round(step_b, 5),
        "ratio": round(ratio, 3),
        "target": f"<= {target}",
        "verdict": "meets" if ratio <= target else "misses",
        "steps": len(times["a"]),
        "rounds": rounds,
        "check": check,
        "recipe": recipe,
        "a": " ".join(PAIRS[name][1]),
        "b": " ".join(PAIRS[name][2]) + (" (one fixed batch)" if fixed else ""),
        "overrides": " ".join([f"data.format={fmt}", f"data.fraction={fraction:g}"] + common),
        "device": device_name(),
        "commit": (commit() or "unknown")[:7],
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", nargs="+", choices=sorted(PAIRS), default=list(PAIRS))
    parser.add_argument("--data", type=Path, help="CIFAR-10 ImageFolder root (train/, test/); else CIFAR10_DIR")
    parser.add_argument("--format", default="memory", choices=["memory", "dali", "image_folder"])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fraction", type=float, default=-1, help="share of the training images (-1: all)")
    parser.add_argument("--csv", type=Path, help="append the rows here")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides for every setting")
    args = parser.parse_args(argv)
    bad = [o for o in args.set if "=" not in o]
    if bad:
        parser.error(f"--set takes KEY=VALUE overrides, got {bad}")
    if args.data is not None:
        if not (args.data / "train").is_dir():
            parser.error(f"--data {args.data}: no train/ folder (an ImageFolder root is expected)")
        os.environ["CIFAR10_DIR"] = str(args.data)
    quiet()
    out = Path(tempfile.mkdtemp())
    print("| pair | A s / step | B s / step | A / B | target | verdict |\n|---|---|---|---|---|---|", flush=True)
    for name in args.pairs:  # each row is kept as soon as it is measured: a call cut later loses none
        row = time_pair(name, args.set, args.format, args.steps, args.rounds, args.fraction, out)
        cells = [row[c] for c in ("pair", "a_s_per_step", "b_s_per_step", "ratio", "target", "verdict")]
        print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)
        if args.csv is not None:
            append_row(args.csv, row)


def append_row(path: Path, row: dict) -> None:
    """One pair's row appended to ``path`` (the header first when the file is new)."""
    new = not path.is_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow(row)


if __name__ == "__main__":
    main()
