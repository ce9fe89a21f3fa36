"""Time to accuracy from the runs' own clocks: each record row is one run trained end to end on
one machine, read from the ``epoch_knn.csv`` its ``epoch_knn`` callback wrote (the backbone's kNN
on the test images after every epoch, off the training clock).

    python benchmarks/own_clock.py collect RUN_FOLDER [RUN_FOLDER ...] [--log LOG ...]
    python benchmarks/own_clock.py report

``collect`` copies a finished run's small files (``epoch_knn.csv``, ``metrics.csv``, ``run.json``,
``args.json``, its console log) into ``results/speedrun/own_clock/<run name>/`` with
``machine.json``, the CPU it is collected on (run it on the machine that trained). ``report``
writes ``records.csv`` and ``records.md`` there: per run, the training minutes from which the
curve stays at or above 50 / 55 / 60 / 65 / 70% (and, for comparison with older tables, the first
epoch at or above), the kNN at 20, 30 and 60 training minutes, the machine, commit and command.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from doc_blocks import write_table

from mvssl_plugin.config.hardware import cpu_bf16_native
from mvssl_plugin.eval.time_to_accuracy import first_at_or_above, stays_at_or_above
from mvssl_plugin.files import read_csv, read_json, write_csv, write_json
from mvssl_plugin.runs import EPOCH_KNN, METRICS, RUN_LOG

OUT = Path(__file__).resolve().parent / "results" / "speedrun" / "own_clock"
TARGETS = (50, 55, 60, 65, 70)
#: training minutes at which the kNN reached so far is read
AT_MINUTES = (20, 30, 60)
SMALL_FILES = (EPOCH_KNN, METRICS, RUN_LOG, "args.json")
#: the pages whose own-clock table ``report`` writes, between these markers: none now (the first
#: speedrun's records, finished; the table is ``OUT/records.md``)
PAGES: Tuple[Path, ...] = ()
START = "<!-- own-clock records: made by `python benchmarks/own_clock.py report` from results/speedrun/own_clock -->"
END = "<!-- end of the own-clock table -->"


def machine() -> Dict[str, object]:
    """This machine's CPU: model, family and model numbers, the ISA the step depends on, cores."""
    info: Dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    flags = set(info.get("flags", "").split())
    native, _ = cpu_bf16_native()
    return {
        "model": info.get("model name", "unknown"),
        "family": info.get("cpu family", ""),
        "model_number": info.get("model", ""),
        "isa": "+".join(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags) or "unknown",
        "bf16_native": native,
        "cores": len(os.sched_getaffinity(0)),
    }


def machine_key(cpu: Dict[str, object]) -> str:
    """A folder name for a CPU kind, e.g. ``amd-epyc-26-2``: runs on different kinds are not compared
    by their minutes."""
    name = re.sub(r"\((r|tm)\)|\bprocessor\b|\bcpu\b", " ", str(cpu["model"]).lower())
    return "-".join(re.findall(r"[a-z0-9]+", name) + [str(cpu["family"]), str(cpu["model_number"])])


def collect(folder: Path, log: Optional[Path], out: Path = OUT) -> Path:
    """Copies a finished run's small files and this machine's description into ``out/<run name>``."""
    args = read_json(folder / "args.json")
    launches = read_json(folder / RUN_LOG, {"launches": []})["launches"]
    if not launches or not launches[-1].get("finished"):
        raise SystemExit(f"{folder}: not finished (run.json): collect finished runs only")
    if not (folder / EPOCH_KNN).is_file():
        raise SystemExit(f"{folder}: no {EPOCH_KNN}: the run had epoch_knn.enabled=false")
    return copy_small_files(folder, log, out / str(args["name"]))


def copy_small_files(folder: Path, log: Optional[Path], target: Path) -> Path:
    """A run's small files that exist (``SMALL_FILES``), its console log as ``console.log`` and this
    machine's description (``machine.json``) into ``target``: what a collected run keeps."""
    target.mkdir(parents=True, exist_ok=True)
    for name in SMALL_FILES:
        if (folder / name).is_file():
            shutil.copy2(folder / name, target / name)
    if log is not None and log.is_file():
        shutil.copy2(log, target / "console.log")
    write_json(target / "machine.json", machine())
    return target


def minutes_at(values: Sequence[float], seconds: Sequence[float], minutes: float) -> Optional[float]:
    """The kNN of the last epoch finished within ``minutes`` of training; None before the first, and
    for a run that ended sooner (it says nothing of a longer budget)."""
    done = [v for v, s in zip(values, seconds) if s <= minutes * 60]
    return done[-1] if done and seconds[-1] >= minutes * 60 else None


def within(rows: Sequence[Dict[str, str]], minutes: float) -> List[Dict[str, str]]:
    """The epochs that ``epoch_knn.stop_after_minutes=minutes`` would have let a run train: up to
    the first whose training clock reaches them, the callback's rule. At a constant lr a run
    trained on past them reads, up to there, as the shorter run."""
    for i, r in enumerate(rows):
        if float(r["train_seconds"]) >= minutes * 60:
            return list(rows[: i + 1])
    return list(rows)


def record(folder: Path, until_minutes: Optional[float] = None, acc: str = "knn_val_acc1") -> Dict[str, object]:
    """One record row of a collected run, read on its kNN ``acc`` (the test set's; ``knn_holdout_acc1``:
    the validation split's); with ``until_minutes``, of its epochs ``within`` them."""
    rows = read_csv(folder / EPOCH_KNN)
    rows = rows if until_minutes is None else within(rows, until_minutes)
    args, cpu = read_json(folder / "args.json"), read_json(folder / "machine.json")
    launches = read_json(folder / RUN_LOG)["launches"]
    values = [float(r[acc]) for r in rows]
    seconds = [float(r["train_seconds"]) for r in rows]

    def minutes(index: Optional[int]) -> str:
        return "" if index is None else f"{seconds[index] / 60:.1f}"

    row: Dict[str, object] = {
        "run": folder.name,
        "method": args["method"],
        "seed": args["seed"],
        "epochs": len(rows),
        "final_knn": values[-1],
        **{f"min_to_{t}": minutes(stays_at_or_above(values, t)) for t in TARGETS},
        **{f"first_min_to_{t}": minutes(first_at_or_above(values, t)) for t in TARGETS},
        **{f"knn_at_{m}_min": minutes_at(values, seconds, m) or "" for m in AT_MINUTES},
        "train_minutes": round(seconds[-1] / 60, 1),
        "knn_seconds_per_epoch": round(sum(float(r["eval_seconds"]) for r in rows) / len(rows), 1),
        "cpu": f"{cpu['model']} (family {cpu['family']} model {cpu['model_number']}), {cpu['cores']} cores, "
        f"{cpu['isa']}",
        "precision": args.get("precision", ""),
        "commit": launches[-1].get("plugin_commit", ""),
        "launches": len(launches),
        "command": launches[0].get("command", ""),
    }
    return row


def markdown(rows: List[Dict[str, object]]) -> str:
    head = ["run", "seed", "epochs", "final kNN"] + [f"min to {t}%" for t in TARGETS] + ["kNN at 20 min", "cpu"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["run"], r["seed"], r["epochs"], r["final_knn"]] + [r[f"min_to_{t}"] or "-" for t in TARGETS]
        lines.append("| " + " | ".join(str(c) for c in cells + [r["knn_at_20_min"] or "-", r["cpu"]]) + " |")
    return "\n".join(lines) + "\n"


def report(out: Path = OUT, pages: Sequence[Path] = PAGES) -> List[Dict[str, object]]:
    """``records.csv`` and ``records.md`` in ``out``, and the table between the own-clock markers of
    each page in ``pages`` (the README's headline table, the speedrun page's)."""
    rows = [record(f) for f in sorted(out.iterdir()) if (f / EPOCH_KNN).is_file()]
    write_csv(out / "records.csv", rows)
    table = markdown(rows)
    write_table(table, out / "records.md", pages, START, END)
    return rows


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    take = sub.add_parser("collect", help="copy finished runs' small files here")
    take.add_argument("folders", nargs="+", type=Path)
    take.add_argument("--log", nargs="*", type=Path, default=[], help="each run's console log, in the same order")
    sub.add_parser("report", help="records.csv and records.md from what was collected")
    args = parser.parse_args(argv)
    if args.action == "collect":
        logs = list(args.log) + [None] * (len(args.folders) - len(args.log))
        for folder, log in zip(args.folders, logs):
            print(f"own_clock: {folder} -> {collect(folder, log)}")
    else:
        print(markdown(report()), end="")


if __name__ == "__main__":
    main()
