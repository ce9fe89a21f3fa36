"""summary.md and plots of the CPU claims benchmark, made from its CSVs only.

    python benchmarks/cpu_claims.py --report

Per claim: a table of the runs that decide it (the mean over seeds, and the seeds' spread
where there are two), its verdict, and a plot of backbone kNN against views processed
and against training seconds. A verdict says "holds" or "does not hold" only where both
sides have two seeds and the gap is larger than the larger of the two spreads;
otherwise it says "inconclusive" and why; a claim of equal accuracy (the data claim) holds
where the gap is not below minus that spread; the views claim is decided in time: the views
to reach the baseline's final kNN at the step times measured side by side, on every machine
that measured them (the ratios differ by CPU).

Rows in, text and plots out (:func:`write_report`); :func:`report` reads a scale's CSVs for it.
What the rows say (the verdicts) is ``claims.verdicts``'; the plots are ``claims.plots``'.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from doc_blocks import replace_between
from paper import PAPER

from mvssl_plugin.files import read_csv

from .clocks import seconds_per_view, step_times_by_machine
from .grid import BASE_EPOCHS, Scale, schedule
from .plots import plot
from .verdicts import Grid, Key, accuracy_cell, setting_label, time_to_baseline, verdict, views_verdict


def reach_section(grid: Grid, base: Key, keys: Sequence[Key], step_times: Sequence[dict]) -> List[str]:
    """Views and seconds each setting takes to first reach the baseline's final kNN; seconds at
    the step rates measured side by side (``step_times.csv``), so shared-machine clocks do not
    enter. A verdict per setting: faster in time than the baseline (the paper's claim), or not."""
    target, _, _ = grid.accuracy(base)
    if target is None:
        running = grid.unfinished(base)
        where = f" (at {running[0][2]:.1f}% after epoch {running[0][1]})" if running else ""
        return [f"Views and seconds to reach the baseline: the baseline has not finished{where}.", ""]
    cpus = list(step_times_by_machine(step_times)) or ["-"]
    lines = [f"The 2-view baseline's final kNN: {target:.1f}%. First reached at:", ""]
    if len(cpus) == 1:
        lines += ["| run | views | x baseline's views | s at the measured step rate | x baseline's time |"]
    else:
        lines += [
            f"| run | views | x baseline's views | s at the step rate of {cpus[0]} | "
            + " | ".join(f"x baseline's time: {cpu}" for cpu in cpus)
            + " |"
        ]
    lines += ["|---|---|---" + "|---" * (1 + len(cpus)) + "|"]
    for key in keys:
        found = time_to_baseline(grid, base, key, step_times)
        if found is None:
            ran = key in grid.final or bool(grid.curves.get(key))
            lines.append(
                f"| {setting_label(key)} | {'not reached' if ran else 'not run yet'} |" + " |" * (2 + len(cpus))
            )
            continue
        views, views_x, ratios = found
        rate = seconds_per_view(step_times, *key[:3])
        seconds = f"{views * rate:,.0f}" if rate is not None else "no step time"
        by_cpu = dict(ratios)
        cells = " | ".join(f"{by_cpu[cpu]:.2f}" if cpu in by_cpu else "-" for cpu in cpus)
        lines.append(f"| {setting_label(key)} | {views:,.0f} | {views_x:.2f} | {seconds} | {cells} |")
    lines += [""] + equal_seconds_table(grid, base, keys, step_times)
    verdicts = [f"- {setting_label(key)}: {views_verdict(grid, base, key, step_times)}" for key in keys if key != base]
    when = "; ".join(
        f"step times measured {rows[0].get('date', '?')}, {cpu}"
        for cpu, rows in step_times_by_machine(step_times).items()
    )
    when = when or "no step times measured yet"
    return lines + ["", f"({when}: `python benchmarks/cpu_claims.py --step-times`.)", ""] + verdicts + [""]


def equal_seconds_table(grid: Grid, base: Key, keys: Sequence[Key], step_times: Sequence[dict]) -> List[str]:
    """Each setting's kNN at the last epoch of its curve (seed 1) that the baseline's curve
    (seed 1) also spans in seconds, against the baseline's after the same seconds, both at the
    step rates of ``step_times.csv``'s first machine: which learns more per second, whether or
    not it reaches the baseline's final kNN."""
    base_rate = seconds_per_view(step_times, *base[:3])
    base_rows = sorted(grid.curves.get(base, {}).get(1, []), key=lambda r: int(r["epoch"]))
    if base_rate is None or not base_rows:
        return []
    timed = [{**r, "train_seconds": float(r["views_seen"]) * base_rate} for r in base_rows]
    cpu = next(iter(step_times_by_machine(step_times)))
    lines = [f"At equal seconds (seed 1, step rates of {cpu}):", ""]
    lines += ["| run | epoch | s at the step rate | kNN | the baseline's kNN at the same s |", "|---|---|---|---|---|"]
    for key in keys:
        rows = grid.curves.get(key, {}).get(1, [])
        rate = seconds_per_view(step_times, *key[:3])
        if key == base or not rows or rate is None:
            continue
        spanned = [r for r in rows if knn_at(timed, float(r["views_seen"]) * rate) is not None]
        if not spanned:
            continue
        last = max(spanned, key=lambda r: int(r["epoch"]))
        seconds = float(last["views_seen"]) * rate
        theirs = knn_at(timed, seconds)
        cell = f"{theirs:.2f}"
        mine = float(last["knn_backbone"])
        lines.append(f"| {setting_label(key)} | {last['epoch']} | {seconds:,.0f} | {mine:.2f} | {cell} |")
    return lines


TABLE_START = "<!-- cpu-claims table: made by `python benchmarks/cpu_claims.py --report` from its CSVs -->"
TABLE_END = "<!-- end of the cpu-claims table -->"


class Claim(NamedTuple):
    """One comparison of the claims table."""

    claim: str  # the paper's claim (a key of PAPER)
    text: str  # what is compared, as the table prints it
    how: str  # "reach", "beats" or "matches" (see :func:`claims`)
    a: Key
    b: Key
    label: str = ""  # ``a``'s short name in a "beats"/"matches" verdict


def claims(e: int) -> List[Claim]:
    """The claims table's comparisons (``e``: the baseline's epochs): with "reach", whether ``a``
    reaches baseline ``b``'s final kNN in less time; with "beats" or "matches", whether ``a``'s
    final kNN is above ``b``'s, or not below it. Every key is a setting the report shows (tested)."""
    base: Key = ("mabt", 2, 2048, "fixed", 1.0, e)
    two: Key = ("mabt", 2, 256, "rule", 1.0, e)
    return [
        Claim("projector", "d = 64, rule vs fixed beta", "beats",
              ("mabt", 2, 64, "rule", 1.0, e), ("mabt", 2, 64, "fixed", 1.0, e), "d = 64"),
        Claim("views", "m = 4, d = 256, rule vs m = 2, d = 2048, fixed: time to the baseline's final kNN", "reach",
              ("mabt", 4, 256, "rule", 1.0, e), base),
        Claim("views", "m = 8, d = 256, rule, the same", "reach", ("mabt", 8, 256, "rule", 1.0, e // 2), base),
        Claim("views", "VICReg (`mavicreg`): m = 4, d = 256, rule vs m = 2, d = 2048, fixed, the same", "reach",
              ("mavicreg", 4, 256, "rule", 1.0, e), ("mavicreg", 2, 2048, "fixed", 1.0, e)),
        # the views claim split in two: the projector at equal views, the views at equal d
        Claim("views", "its two parts: the projector at equal views, m = 2, d = 256, rule vs the baseline, the same",
              "reach", two, base),
        Claim("views", "the views at equal d: m = 4, d = 256 vs m = 2, d = 256 (rule): time to m = 2's final kNN",
              "reach", ("mabt", 4, 256, "rule", 1.0, e), two),
        Claim("views", "m = 8, d = 256 vs m = 2, d = 256 (rule), the same", "reach",
              ("mabt", 8, 256, "rule", 1.0, e // 2), two),
        Claim("data", "4 x 50% vs 2 x 100%, equal views", "matches", ("mabt", 4, 256, "rule", 0.5, e), two, "4 x 50%"),
        Claim("data", "8 x 25% vs 2 x 100%, equal views", "matches", ("mabt", 8, 256, "rule", 0.25, e), two, "8 x 25%"),
    ]  # fmt: skip


def claims_table(
    grid: Grid, step_times: Sequence[dict], epochs: int, setting: str = "width-16 ResNet-18, CPU"
) -> List[str]:
    """One row per comparison of :func:`claims`: the paper's figure, the comparison, its verdict."""
    lines = [f"| claim | paper | benchmark: all of CIFAR-10, {setting} | verdict |", "|---|---|---|---|"]
    previous = None
    for c in claims(epochs):
        if c.how == "reach":
            said = views_verdict(grid, c.b, c.a, step_times)
        else:
            said = verdict(grid, c.a, c.b, c.label, matches=c.how == "matches")
        again = c.claim == previous
        lines.append(f"| {'' if again else c.claim} | {'' if again else PAPER[c.claim]} | {c.text} | {said} |")
        previous = c.claim
    return lines


def is_precision_check(run: str) -> bool:
    """The 1-epoch bf16-against-fp32 runs, not points of the grid's claims."""
    return "precision" in run or "-e1-" in run


def precision_section(results: List[dict]) -> List[str]:
    """The 1-epoch check that bf16 (the CPU default where native) learns as fp32 does."""
    runs = [r for r in results if is_precision_check(r["run"])]
    lines = ["## bf16 against fp32: one epoch, m = 2, d = 256, the rule", ""]
    lines += ["| precision | seed | kNN | projector RankMe | training s |", "|---|---|---|---|---|"]
    for row in sorted(runs, key=lambda r: (r["precision"], r["seed"])):
        lines.append(
            f"| {row['precision']} | {row['seed']} | {float(row['knn_backbone']):.2f} | {row['rank_projector']} "
            f"| {row['train_seconds']} |"
        )
    by = defaultdict(list)
    for row in runs:
        by["fp32" if row["precision"].startswith("32") else "bf16"].append(float(row["knn_backbone"]))
    if len(by["fp32"]) > 1 and len(by["bf16"]) > 1:
        gap = statistics.mean(by["bf16"]) - statistics.mean(by["fp32"])
        spread = max(max(v) - min(v) for v in by.values())
        same = "within" if abs(gap) <= spread else "beyond"
        lines += ["", f"bf16 - fp32: {gap:+.2f} points, {same} the seeds' spread of {spread:.2f}."]
    else:
        lines += ["", "Not decided yet: each precision needs 2 seeds."]
    return lines + [""] + mixed_precision_note(results)


def mixed_precision_note(results: List[dict]) -> List[str]:
    """Which of the grid's runs ran in which precision, where they differ: a run's precision is
    its machine's (``auto``), and the grid continues on whatever CPU a session has."""
    runs = [r for r in results if not is_precision_check(r["run"])]
    by: Dict[str, List[str]] = defaultdict(list)
    for row in runs:
        by[f"{row.get('precision', '?')} ({row.get('cpu', '?')})"].append(row["run"])
    if len(by) < 2:
        return []
    lines = ["The grid's runs were not all in one precision (each ran in its machine's `auto`):", ""]
    lines += [f"- {where}: {', '.join(sorted(names))}" for where, names in sorted(by.items())]
    return lines + [
        "",
        "Their kNN is compared by epochs and views, which the check above finds the same in either "
        "precision; their seconds come from the step times measured side by side, not their own clocks.",
        "",
    ]


def knn_at(rows: Sequence[dict], seconds: float) -> Optional[float]:
    """kNN of a curve at ``seconds`` of training, linear between its epochs; None outside it."""
    points = sorted((float(r["train_seconds"]), float(r["knn_backbone"])) for r in rows)
    for (s0, k0), (s1, k1) in zip(points, points[1:]):
        if s0 <= seconds <= s1:
            return k0 + (k1 - k0) * (seconds - s0) / (s1 - s0) if s1 > s0 else k1
    return points[0][1] if len(points) == 1 and points[0][0] == seconds else None


def width_section(
    curves: List[dict], pairs: Sequence[Tuple[str, str]], rates: Optional[Dict[str, float]] = None
) -> List[str]:
    """The wider backbone against the grid's at equal seconds: ``pairs`` of (wide run, its
    grid-width counterpart) names. With ``rates`` (run name -> seconds per view from
    ``step_times.csv``) for both runs of a pair, a row's seconds are its views at that rate;
    else the run's own training seconds (a shared machine's: indicative)."""
    lines = ["## The backbone's width: 32 against the grid's 16 at equal training seconds", ""]
    lines += ["| run | epoch | seconds | kNN | grid width at the same seconds |", "|---|---|---|---|---|"]
    verdicts = []
    for wide, narrow in pairs:
        timed = rates is not None and wide in rates and narrow in rates

        def clocked(run: str) -> List[dict]:
            rows = sorted((r for r in curves if r["run"] == run), key=lambda r: int(r["epoch"]))
            if timed:
                return [{**r, "train_seconds": float(r["views_seen"]) * rates[run]} for r in rows]
            return rows

        rows, base = clocked(wide), clocked(narrow)
        if not rows:
            lines.append(f"| {wide} | not run yet | | | |")
            continue
        last = None
        for row in rows:
            other = knn_at(base, float(row["train_seconds"])) if base else None
            cell = f"{other:.2f}" if other is not None else "not reached yet"
            lines.append(
                f"| {wide} | {row['epoch']} | {float(row['train_seconds']):,.0f} | {row['knn_backbone']} | {cell} |"
            )
            if other is not None:
                last = (float(row["train_seconds"]), float(row["knn_backbone"]), other)
        if last is not None:
            seconds, mine, theirs = last
            better = "the grid's width" if theirs >= mine else "the wider backbone"
            clock = "at the step times measured side by side" if timed else "clocks of a shared machine, indicative"
            verdicts.append(
                f"- {wide} against {narrow} at {seconds:,.0f} s: {mine:.2f} vs {theirs:.2f}%: "
                f"{better} learns more per CPU-second (one seed; {clock})"
            )
    return lines + [""] + verdicts + ([""] if verdicts else [])


#: the projector claim's output dimensions (the grid in ``claims.grid.grid``)
PROJECTOR_DS = (64, 256, 2048)


Section = Tuple[str, str, List[Key], List[Tuple[Key, Key, str]]]  # title, slug, runs, contests


def sections(e: int) -> List[Section]:
    """The report's sections: title, plot name, the settings it shows (``e``: the baseline's
    epochs) and the pairs it judges. Every setting of the grid is in one of them (tested)."""
    baseline: Key = ("mabt", 2, 2048, "fixed", 1.0, e)
    return [
        (
            "Projector: beta by the rule keeps a small projector working (m = 2)",
            "projector",
            [("mabt", 2, d, beta, 1.0, e) for d in PROJECTOR_DS for beta in ("rule", "fixed")],
            [  # the paper: the rule works at every d; a fixed beta fails at small d
                (("mabt", 2, d, "rule", 1.0, e), ("mabt", 2, d, "fixed", 1.0, e), f"d = {d}: rule vs fixed beta")
                for d in PROJECTOR_DS
            ],
        ),
        (
            "Views: 4 and 8 views reach the 2-view baseline sooner (run to twice its views)",
            "views",
            [baseline, ("mabt", 4, 256, "rule", 1.0, e), ("mabt", 8, 256, "rule", 1.0, e // 2)]
            + [("barlow_twins", 2, 2048, "fixed", 1.0, e)],
            [],
        ),
        (
            "Data: 4 x 50% and 8 x 25% against 2 x 100% at equal views",
            "data",
            [("mabt", 2, 256, "rule", 1.0, e), ("mabt", 4, 256, "rule", 0.5, e), ("mabt", 8, 256, "rule", 0.25, e)],
            [
                (("mabt", 4, 256, "rule", 0.5, e), ("mabt", 2, 256, "rule", 1.0, e), "4 x 50% vs 2 x 100%"),
                (("mabt", 8, 256, "rule", 0.25, e), ("mabt", 2, 256, "rule", 1.0, e), "8 x 25% vs 2 x 100%"),
            ],
        ),
        (
            "VICReg and MMCR",
            "vicreg",
            [("mavicreg", 2, 2048, "fixed", 1.0, e), ("mavicreg", 4, 256, "rule", 1.0, e)]
            + [("mmcr", 4, 256, "none", 1.0, e // 2)],
            [],
        ),
    ]


def write_report(
    out: Path,
    results: List[dict],
    curves: List[dict],
    step_times: List[dict],
    base_epochs: int,
    width_pairs: Sequence[Tuple[str, str]],
    rates: Dict[str, float],
    readme: Optional[Path] = None,
    setting: str = "width-16 ResNet-18, CPU",
) -> Path:
    """Writes ``summary.md`` and one plot per claim under ``out`` from the CSVs' rows, and the
    claims table into ``readme`` between its markers; returns summary.md. ``width_pairs`` and
    ``rates``: see :func:`width_section`."""
    grid = Grid(results, curves)
    e = base_epochs
    lines = [
        f"# The paper's claims on all of CIFAR-10: {setting}",
        "",
        "Made by `python benchmarks/cpu_claims.py --report` from `results.csv` and `curves.csv`",
        "(the setting and the method: `benchmarks/cpu_claims.py`). Backbone kNN top-1 on the 10,000",
        "test images, k = 20, cosine; the mean over seeds ± half their spread.",
        "",
    ]
    table = claims_table(grid, step_times, e, setting)
    lines += ["## The claims at a glance", ""] + table + [""]
    if readme is not None:
        readme.write_text(replace_between(readme.read_text(), TABLE_START, TABLE_END, table))
    if "CPU" in setting:  # questions about the CPU only: its bf16, its backbone width
        lines += precision_section(results)
        lines += width_section(curves, width_pairs, rates)
    for title, slug, keys, contests in sections(e):
        lines += [f"## {title}", "", f"![{slug}]({slug}.png)", ""]
        lines += ["| run | epochs | final kNN | projector RankMe |", "|---|---|---|---|"]
        for key in keys:
            value, spread, seeds = grid.accuracy(key)
            ranks = [float(r["rank_projector"]) for r in grid.final.get(key, [])]
            rank = f"{statistics.mean(ranks):.1f}" if ranks else "-"
            cell = accuracy_cell(value, spread, seeds, grid.unfinished(key))
            lines.append(f"| {setting_label(key)} | {key[-1]} | {cell} | {rank} |")
        lines.append("")
        if slug in ("views", "vicreg"):
            lines += reach_section(grid, keys[0], keys, step_times)
        for better, worse, claim in contests:
            lines += [f"- {claim}: " + verdict(grid, better, worse, claim.split(":")[0]), ""]
        plot(grid, keys, out / f"{slug}.png", title, step_times)
    path = out / "summary.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def report(scale: Scale, readme: Optional[Path] = None) -> Path:
    """summary.md, the plots and (with ``readme``) docs/claims.md's claims table from ``scale``'s CSVs."""
    step_times = read_csv(scale.step_times)
    pairs, rates = [], {}
    for point, seed in schedule(scale, (1, 2)):
        if "width" not in point.parts:
            continue
        narrow = replace(point, width=scale.width, epochs=BASE_EPOCHS)
        pairs.append((point.name(seed), narrow.name(seed)))
        for p in (point, narrow):
            rate = seconds_per_view(step_times, p.method, p.m, p.d, p.width)
            if rate is not None:
                rates[p.name(seed)] = rate
    results, curves = read_csv(scale.results), read_csv(scale.curves)
    grid_steps = [r for r in step_times if int(r["width"]) == scale.width]  # the claims' rows: the grid's width
    return write_report(scale.out, results, curves, grid_steps, BASE_EPOCHS, pairs, rates, readme, scale.setting)
