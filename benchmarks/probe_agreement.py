"""Table of the three evaluations of each run (full linear flow, fast probe, kNN) and how far
the fast probe agrees with the full flow (same ranking of runs), from the files
``benchmarks/cpu_compare_demo.sh`` writes.

    python benchmarks/probe_agreement.py <runs folder> <linear runs folder> <timings.txt>
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path


def linear_results(linear_root: Path) -> dict[str, dict]:
    """Pretrained run folder -> final val_acc1 and training seconds of its linear run."""
    out = {}
    for args_file in linear_root.rglob("args.json"):
        args = json.loads(args_file.read_text())
        metrics = args_file.parent / "metrics.csv"
        if "pretrained_feature_extractor" not in args or not metrics.is_file():
            continue
        with open(metrics, newline="") as handle:
            rows = list(csv.DictReader(handle))
        if rows:
            source = str(Path(args["pretrained_feature_extractor"]).resolve().parent)
            out[source] = {"acc1": float(rows[-1]["val_acc1"]), "epochs": len(rows)}
    return out


def seconds(timings: Path, pattern: str, run: Path) -> str:
    for line in timings.read_text().splitlines():
        if pattern in line and str(run).rstrip("/") in line:
            return re.match(r"mvssl-demo: (\d+) s", line).group(1)
    return "-"


def ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    for rank, i in enumerate(order):
        out[i] = rank
    return out


def spearman(a: list[float], b: list[float]) -> float:
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))


def main() -> None:
    runs_root, linear_root, timings = map(Path, sys.argv[1:4])
    linear = linear_results(linear_root)
    rows = []
    for args_file in sorted(runs_root.rglob("args.json")):
        run = args_file.parent
        args = json.loads(args_file.read_text())
        probe = json.loads((run / "probe.json").read_text()) if (run / "probe.json").is_file() else None
        knn = []
        if (run / "knn.csv").is_file():
            with open(run / "knn.csv", newline="") as handle:
                knn = [r for r in csv.DictReader(handle) if r["feature"] == "backbone"]
        full = linear.get(str(run.resolve()))
        views = sum(a["num_crops"] for a in args["augmentations"])
        rows.append(
            {
                "run": f"{args['method']} m={views}" + (" (random init)" if "random-init" in args["name"] else ""),
                "linear flow top-1": full["acc1"] if full else None,
                "linear flow s": seconds(timings, "linear_cifar_cpu.yaml", run),
                "probe top-1": probe["acc1"] if probe else None,
                "probe top-1 (patches)": next((v for k, v in (probe or {}).items() if k.startswith("acc1_")), None),
                "probe s": seconds(timings, "probe_cifar_cpu.yaml", run),
                "kNN top-1 (best k, backbone)": max((float(r["acc1"]) for r in knn), default=None),
            }
        )
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in row.values()) + " |")
    pairs = [(r["linear flow top-1"], r["probe top-1"]) for r in rows if r["linear flow top-1"] and r["probe top-1"]]
    if len(pairs) >= 3:
        rho = spearman([p[0] for p in pairs], [p[1] for p in pairs])
        print(f"\nSpearman rank correlation, linear flow vs fast probe, over {len(pairs)} runs: {rho:.2f}")


if __name__ == "__main__":
    main()
