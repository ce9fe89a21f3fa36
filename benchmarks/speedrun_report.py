"""The speedrun's report, from its CSVs only: records.csv, levers.csv, peer.csv, summary.md and
the plot in its results folder, and the records and levers tables for readers in docs/speedrun.md.

    python benchmarks/speedrun_report.py [--results FOLDER]

The modelled-clock speedrun's runs are finished: their CSVs in ``results/speedrun/`` are all it
reads. The harness that trained them (``speedrun.py``) was retired once every run of its plan was
done and the records moved to the runs' own clocks (``own_clock.py``, ``leaderboard.py``); it is
at commit 4a67e15 (``git checkout 4a67e15`` trains its runs again).

Time is steps x the setting's seconds per step on a named machine (never a run's own
wall-clock, which shares the machine with whatever else ran): measured side by side with the
claims baseline on that machine, or, on a machine where only the claims grid measured steps,
the claims' step where the step is the same one, else the setting's ratio to the baseline
measured elsewhere times the baseline's step there (the ``basis`` column says which;
``speedrun_clock``). The rows' arithmetic is ``speedrun_rows``'; this module reads the files,
writes them, and sets the rows out as markdown tables and a plot.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from claims import clocks
from claims.grid import REPO
from doc_blocks import replace_between
from speedrun_clock import baseline_step, step_times_on
from speedrun_rows import BUDGETS, TARGETS, curve_of, lever_rows, record_rows, speedup_rows, untimed_rows
from speedrun_settings import (
    BASELINE,
    CLAIMS_STEP_TIMES,
    LEVERS,
    OUT,
    PEER_EPOCHS,
    RECIPE_SETTING,
    SCREEN_EPOCHS,
    SETTINGS,
    STEPS,
    epochs_of,
    recipe_words,
    setting_of,
)

from mvssl_plugin.files import read_csv, write_csv

#: the targets' kind of machine: 2 cores that compute bf16 natively
TARGET_KIND = clocks.machine_kind(2, True)
#: the machine of the targets: the records' first clock
TARGET_MACHINE = f"AMD EPYC, {TARGET_KIND}"


def of_the_targets_kind(machine: str) -> bool:
    """Whether ``machine`` (``clocks.cpu_description``) is of the targets' kind (``TARGET_KIND``).
    The README's records are timed on each such machine that measured the steps."""
    return machine.endswith(f", {TARGET_KIND}")


def peer_lines(rows: Sequence[dict]) -> List[str]:
    """The peer target's paragraph and table (``speedrun_rows.speedup_rows``' rows)."""
    return [
        f"Against solo-learn's `barlow_twins` recipe (`peer`, {PEER_EPOCHS} epochs): the minutes each took to",
        "the peer's final kNN (the end of the first epoch at or above it, for both), the peer's run against",
        f"`{RECIPE_SETTING}`'s of the same seed (`peer.csv`; the target: at least 2x less time).",
        "",
        *(speedup_table(rows) if rows else ["The peer's full run has not finished yet."]),
    ]


#: where the report writes its tables for readers: the modelled-clock records and the levers, both in
#: the docs (the README's headline table is the runs' own clock: own_clock.py)
README = REPO / "docs" / "speedrun.md"
LEVERS_DOC = REPO / "docs" / "speedrun.md"
RECORDS_START = "<!-- speedrun records: made by `python benchmarks/speedrun_report.py` from its CSVs -->"
LEVERS_START = "<!-- speedrun levers: made by `python benchmarks/speedrun_report.py` from its CSVs -->"
END = "<!-- end of the speedrun table -->"


def report(out: Path = OUT, readme: Optional[Path] = README, levers_doc: Optional[Path] = LEVERS_DOC) -> Path:
    """records.csv, levers.csv, summary.md and the plot in ``out`` from its CSVs; the record table
    into ``readme`` and the levers table into ``levers_doc``, between their markers."""
    out.mkdir(parents=True, exist_ok=True)
    results, curves = read_csv(out / "results.csv"), read_csv(out / "curves.csv")
    own, claims = read_csv(out / STEPS), read_csv(CLAIMS_STEP_TIMES)
    machines = list(dict.fromkeys([TARGET_MACHINE, *(r["cpu"] for r in own)]))
    finished = [(r["run"], setting_of(r["run"]), int(r["seed"])) for r in results]
    details = {r["run"]: r for r in results}
    runs = [(run, tag, recipe_words(tag), seed) for run, tag, seed in finished if tag in SETTINGS]
    records, levers = [], []
    screens: Dict[str, List[str]] = {}
    for run, tag, _, seed in runs:
        if run == SETTINGS[tag].screen().name(seed):
            screens.setdefault(tag, []).append(run)
    timed: set = set()
    for machine in machines:
        steps = step_times_on(machine, own, claims)
        timed |= set(steps)
        full = [r for r in runs if r[0] != SETTINGS[r[1]].screen().name(r[3])]
        records += record_rows(full, curves, steps, details)
        levers += lever_rows(LEVERS, screens, curves, steps, longer_runs(results))
    untimed = untimed_rows(LEVERS, screens, curves, sorted(timed))
    untimed_block = []
    if untimed:
        untimed_block = [
            "",
            "Screened, but a step not timed: the difference at equal",
            "epochs, which is equal seconds only where the two steps cost the same.",
            "",
            *untimed_table(untimed),
        ]
    write_csv(out / "records.csv", records)
    write_csv(out / "levers.csv", levers)
    peer = speedup_rows(records, curves, "peer", RECIPE_SETTING)
    write_csv(out / "peer.csv", peer)
    targets = [m for m in machines if of_the_targets_kind(m)]
    first = [r for r in records if r["timed_on"] in targets]
    claims_curves = read_csv(CLAIMS_STEP_TIMES.parent / "curves.csv")
    beside = baseline_rows(machines, own, claims, claims_curves, read_csv(CLAIMS_STEP_TIMES.parent / "results.csv"))
    lines = [
        "# Speedrun: time to accuracy on a CPU",
        "",
        "Made by `python benchmarks/speedrun_report.py` from `curves.csv`, `results.csv` and",
        "`steps.csv` (and the claims grid's `step_times.csv`). All of CIFAR-10, the width-16",
        "ResNet-18, backbone kNN (k = 20, cosine) on all 10,000 test images after every epoch;",
        "time = steps x the setting's step time on the named machine (`basis`: how it was timed).",
        "",
        f"## Records, timed on {' and on '.join(targets)}",
        "",
        *(records_table(first) if first else ["No record run has finished yet."]),
        "",
        "## The peer, side by side",
        "",
        *peer_lines(peer),
        "",
        "## The record beside the claims baseline, on every machine timed",
        "",
        "The claims grid's 2-view, d = 2048, fixed-beta baseline (its curves, each machine's step):",
        "",
        *records_table(sorted(records + beside, key=lambda r: r["timed_on"])),
        "",
        f"## Levers, screened at {SCREEN_EPOCHS} epochs (fitted schedules; the resolution ramp at "
        f"{SETTINGS['ramp'].screen_epochs}, about the same seconds), equal training seconds",
        "",
        *(levers_table(levers) if levers else ["No lever pair has finished yet."]),
        *untimed_block,
        "",
        "Every clock: records.csv and levers.csv (one row per machine timed).",
    ]
    summary = out / "summary.md"
    summary.write_text("\n".join(lines) + "\n")
    if readme is not None:
        records_block = records_table(first) if first else ["No record run has finished yet."]
        where = " and on ".join(targets)
        records_block += ["", f"(Timed on {where}; every clock: `benchmarks/results/speedrun/records.csv`.)"]
        records_block += ["", *peer_lines([r for r in peer if r["timed_on"] in targets])]
        readme.write_text(replace_between(readme.read_text(), RECORDS_START, END, records_block))
    if levers_doc is not None:
        shown = [r for r in levers if r["timed_on"] == machines[0]] or levers
        levers_block = levers_table(shown) if shown else ["No lever pair has finished yet."]
        levers_block += untimed_block
        levers_doc.write_text(replace_between(levers_doc.read_text(), LEVERS_START, END, levers_block))
    steps = step_times_on(machines[0], own, claims)
    lines_to_plot = [
        (run, curve_of(curves, run), steps[tag].seconds)
        for run, tag, _, seed in sorted(runs, key=lambda r: (r[1], r[3]))
        if tag in steps and run != SETTINGS[tag].screen().name(seed)
    ]
    base_step = baseline_step(machines[0], own, claims)
    for seed in (1, 2):
        name = BASELINE.name(seed)
        if base_step is not None and curve_of(claims_curves, name):
            curve = curve_of(claims_curves, name)
            lines_to_plot.append((f"claims baseline s{seed}", curve, base_step.seconds))
    if lines_to_plot:
        plot(lines_to_plot, out / "knn_vs_minutes.png", machines[0])
    print(summary.read_text())
    return summary


def baseline_rows(
    machines: Sequence[str], own: Sequence[dict], claims: Sequence[dict], claims_curves: Sequence[dict],
    claims_results: Sequence[dict],
) -> List[dict]:  # fmt: skip
    """The claims baseline's two runs (``claims_curves`` / ``claims_results``: the grid's CSVs) as
    records on each machine with its step (:func:`baseline_step`)."""
    details = {r["run"]: r for r in claims_results}
    runs = [(BASELINE.name(seed), "claims baseline", "mabt m=2 d=2048 fixed beta", seed) for seed in (1, 2)]
    rows: List[dict] = []
    for machine in machines:
        step = baseline_step(machine, own, claims)
        if step is not None:
            rows += record_rows(runs, claims_curves, {"claims baseline": step}, details)
    return rows


def longer_runs(results: Sequence[dict]) -> Dict[str, List[str]]:
    """setting -> its finished runs, shortest first, for settings without a schedule: their first
    epochs are the screen's (a constant lr does not depend on ``max_epochs``)."""
    out: Dict[str, List[str]] = {}
    for r in sorted(results, key=lambda r: epochs_of(r["run"])):
        tag = setting_of(r["run"])
        if tag in SETTINGS and SETTINGS[tag].warmup is None:
            out.setdefault(tag, []).append(r["run"])
    return out


def speedup_table(rows: Sequence[dict]) -> List[str]:
    lines = [
        "| seed | peer's final kNN | peer's minutes | ours to it, minutes | less time | timed on |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        speedup = "never reached" if r["speedup"] == "" else f"{float(r['speedup']):.2f}x"
        lines.append(
            f"| {r['seed']} | {r['peer_final_knn']} | {_minutes(r['peer_seconds'])} | {_minutes(r['ours_seconds'])} "
            f"| {speedup} | {r['timed_on']} |"
        )
    return lines


def untimed_table(rows: Sequence[dict]) -> List[str]:
    lines = [
        "| lever | changed | against | seeds | kNN changed | kNN against | at equal epochs | step not timed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['lever']}: {r['what']} | {r['changed']} | {r['reference']} | {r['seeds']} | {r['knn_changed']} "
            f"| {r['knn_reference']} | {r['gain_points_equal_epochs']:+.2f} | {r['step_not_timed']} |"
        )
    return lines


def _cell(value: object) -> str:
    return "-" if value in ("", None) else str(value)


def _minutes(value: object) -> str:
    return "-" if value in ("", None) else f"{float(value) / 60:.1f}"


def records_table(records: Sequence[dict]) -> List[str]:
    """The records as markdown: minutes to each target and kNN at each budget."""
    head = "| setting | seed | epochs | final kNN | " + " | ".join(f"min to {t}%" for t in TARGETS)
    head += " | " + " | ".join(f"kNN at {b}" for b in BUDGETS) + " | timed on (s / step, basis) |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in records:
        cells = [r["setting"], r["seed"], r["epochs"], r["final_knn"]]
        cells += [_minutes(r[f"s_to_{t}"]) for t in TARGETS]
        cells += [_cell(r[f"knn_at_{b.replace(' ', '')}"]) for b in BUDGETS]
        cells.append(f"{r['timed_on']} ({r['s_per_step']}, {r['basis']})")
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return lines


def levers_table(levers: Sequence[dict]) -> List[str]:
    lines = [
        "| lever | changed | against | seeds | kNN changed | kNN against | step ratio | gain at equal s | timed on |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in levers:
        seeds = f"{r['seeds_changed']} / {r['seeds_reference']}"
        gain = r["gain_points_equal_seconds"]
        gain = "-" if gain == "" else f"{float(gain):+.2f}"
        lines.append(
            f"| {r['lever']}: {r['what']} | {r['changed']} | {r['reference']} | {seeds} | {r['knn_changed']} "
            f"| {r['knn_reference']} | {r['step_ratio']} | {gain} | {r['timed_on']} ({r['basis']}) |"
        )
    return lines


def plot(lines: Sequence[Tuple[str, List[dict], float]], path: Path, machine: str) -> None:
    """kNN against seconds (steps x each line's step time on ``machine``), one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (label, curve, step) in enumerate(lines):
        ax.plot(
            [int(r["step"]) * step / 60 for r in curve],
            [float(r["knn_backbone"]) for r in curve],
            "-" if label.endswith("s1") else "--",
            color=f"C{i // 2}",
            label=label,
            marker=".",
        )
    ax.set_xlabel(f"minutes of training at the step times of\n{machine}")
    ax.set_ylabel("backbone kNN top-1 (%), all 10,000 test images")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=OUT, help="the speedrun's results folder")
    args = parser.parse_args(argv)
    report(args.results)


if __name__ == "__main__":
    main()
