"""Rebuilds the paper-claims report from every run under benchmarks/results/.

    python benchmarks/study_report.py [--results benchmarks/results] [--metric val_acc1]

Runs are the folders the study recipes write (``scripts/pretrain/cifar10/study_*.yaml``):
args.json + metrics.csv + run.json (exact command, device, clocks). Runs accumulate across
sessions and machines; for a configuration run more than once the newest is used and the
count shown. Writes ``report.md``, one CSV per study and the plots into the results folder;
configurations not run yet are listed with the command that runs them.

The accuracy is solo-learn's online linear classifier on the test set (``val_acc1``), logged
each epoch: the paper reports an offline linear probe after pretraining, so absolute numbers
differ; the comparisons within a study are like for like.
"""

from __future__ import annotations

import argparse
import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

from paper import PAPER

from mvssl_plugin.eval.compare import Run, load_run, time_to

REPO = Path(__file__).resolve().parents[1]

DIMS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
SWEEP = "python main_pretrain.py --config-name {recipe} -m data.train_path=<cifar10>/train data.val_path=<cifar10>/test"


@dataclass
class Entry:
    run: Run
    rule: bool
    provenance: dict
    count: int = 1

    @property
    def final(self) -> Optional[float]:
        values = [row["val_acc1"] for row in self.run.rows if "val_acc1" in row]
        return values[-1] if values else None

    @property
    def seconds(self) -> Optional[float]:
        return self.run.rows[-1].get("train_seconds") if self.run.rows else None

    @property
    def device(self) -> str:
        launches = self.provenance.get("launches", [])
        return launches[-1]["device"] if launches else "?"


def collect(results: Path) -> Dict[str, Dict[tuple, Entry]]:
    """study -> configuration key -> newest run."""
    studies: Dict[str, Dict[tuple, Entry]] = {}
    for metrics in sorted(results.glob("study_*/trained_models/*/*/metrics.csv"), key=lambda p: p.stat().st_mtime):
        folder = metrics.parent
        study = folder.parents[2].name
        run = load_run(folder)
        args = json.loads((folder / "args.json").read_text())
        rule = "beta_c" in args.get("method_kwargs", {})
        provenance = json.loads((folder / "run.json").read_text()) if (folder / "run.json").is_file() else {}
        key = (run.method, run.views, run.pdim, rule, run.fraction)
        previous = studies.setdefault(study, {}).get(key)
        studies[study][key] = Entry(run, rule, provenance, count=(previous.count + 1) if previous else 1)
    return studies


def fmt(value: Optional[float], digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(columns: List[str], rows: List[List[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"


def write_csv(path: Path, columns: List[str], rows: List[List[str]]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerows(rows)


def plot_lines(path: Path, series: List[tuple], xlabel: str, ylabel: str, logx: bool = False) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, xs, ys in series:
        ax.plot(xs, ys, marker="o", label=label)
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def study_a(entries: Dict[tuple, Entry], out: Path) -> str:
    text = "## (a) Small projectors: beta by the rule vs one fixed beta\n\n"
    text += f"Paper: {PAPER['projector']}. Recipe: `study_pdim.yaml` (mabt, 2 views, 20 epochs, ResNet-18).\n\n"
    rows, todo, series = [], [], {True: ([], []), False: ([], [])}
    for d in DIMS:
        row = [str(d)]
        for rule in (True, False):
            entry = entries.get(("mabt", 2, d, rule, 1.0))
            row += [fmt(entry.final) if entry else "not run", fmt(entry.run.beta, 6) if entry else "-"]
            if entry and entry.final is not None:
                series[rule][0].append(d)
                series[rule][1].append(entry.final)
            if entry is None:
                todo.append(f"d = {d}, {'rule' if rule else 'fixed beta'}")
        rows.append(row)
    columns = ["d", "val_acc1, rule", "beta, rule", "val_acc1, fixed", "beta, fixed"]
    text += table(columns, rows)
    write_csv(out / "study_a_pdim.csv", columns, rows)
    if any(series[r][0] for r in series):
        plot_lines(
            out / "study_a_pdim.png",
            [("beta by the rule", *series[True]), ("fixed beta (rule at 8192)", *series[False])],
            "projector dimension d",
            "val_acc1 after the last epoch (%)",
            logx=True,
        )
        text += "\n![study a](study_a_pdim.png)\n"
    return text + todo_text(todo, "study_pdim.yaml")


def study_b(entries: Dict[tuple, Entry], out: Path) -> str:
    text = "## (b) More views converge faster\n\n"
    text += f"Paper: {PAPER['views']}. Recipe: `study_views.yaml` (d = 256 vs the 2-view d = 8192 baseline).\n\n"
    columns = ["method", "views", "d", "final val_acc1", "training s", "s to baseline's final", "x baseline's time"]
    rows, todo = [], []
    for method in ("mabt", "mavicreg"):
        baseline = entries.get((method, 2, 8192, True, 1.0))
        if baseline is None:
            todo.append(f"{method} baseline (2 views, d = 8192)")
        target = baseline.final if baseline else None
        series_epoch, series_time = [], []
        for views, dim in ((2, 8192), (2, 256), (4, 256), (8, 256)):
            entry = entries.get((method, views, dim, True, 1.0))
            if entry is None:
                if dim == 256:
                    todo.append(f"{method}, {views} views, d = 256")
                continue
            reach = time_to(entry.run, "val_acc1", target) if target is not None else None
            ratio = reach / baseline.seconds if reach is not None and baseline and baseline.seconds else None
            rows.append(
                [method, str(views), str(dim), fmt(entry.final), fmt(entry.seconds, 0), fmt(reach, 0), fmt(ratio, 2)]
            )
            xs, ys = entry.run.series("val_acc1")
            series_epoch.append((f"{views} views, d={dim}", [x + 1 for x in xs], ys))
            series_time.append((f"{views} views, d={dim}", *entry.run.series("val_acc1", "train_seconds")))
        if series_epoch:
            plot_lines(out / f"study_b_{method}_epoch.png", series_epoch, "epoch", "val_acc1 (%)")
            plot_lines(out / f"study_b_{method}_time.png", series_time, "training seconds", "val_acc1 (%)")
    text += table(columns, rows)
    write_csv(out / "study_b_views.csv", columns, rows)
    for method in ("mabt", "mavicreg"):
        if (out / f"study_b_{method}_epoch.png").is_file():
            text += f"\n![{method} per epoch](study_b_{method}_epoch.png)"
            text += f" ![{method} per second](study_b_{method}_time.png)\n"
    return text + todo_text(todo, "study_views.yaml")


def study_c(entries: Dict[tuple, Entry], out: Path, target: float = 80.0) -> str:
    text = "## (c) More views instead of more images\n\n"
    text += f"Paper: {PAPER['data']}. Recipe: `study_data.yaml` (mabt, d = 256).\n\n"
    columns = ["views x data", "final val_acc1", "training s", f"s to {target:g}%"]
    rows, todo, series = [], [], []
    for views, fraction in ((2, 1.0), (4, 0.5), (8, 0.25)):
        entry = entries.get(("mabt", views, 256, True, fraction))
        label = f"{views} x {fraction:.0%}"
        if entry is None:
            todo.append(label)
            continue
        reach = time_to(entry.run, "val_acc1", target)
        rows.append([label, fmt(entry.final), fmt(entry.seconds, 0), fmt(reach, 0)])
        xs, ys = entry.run.series("val_acc1")
        series.append((label, [x + 1 for x in xs], ys))
    text += table(columns, rows)
    write_csv(out / "study_c_data.csv", columns, rows)
    if series:
        plot_lines(out / "study_c_data.png", series, "epoch", "val_acc1 (%)")
        text += "\n![study c](study_c_data.png)\n"
    return text + todo_text(todo, "study_data.yaml")


def todo_text(todo: List[str], recipe: str) -> str:
    if not todo:
        return "\n"
    return (
        f"\n**Not run yet:** {'; '.join(todo)}. Command (a GPU; one sweep runs every configuration):\n"
        f"`{SWEEP.format(recipe=recipe)}`\n\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=str(REPO / "benchmarks" / "results"))
    args = parser.parse_args()
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    studies = collect(results)
    parts = [
        "# The paper's three claims: our runs\n\n",
        "Rebuilt by `python benchmarks/study_report.py` from every run under `benchmarks/results/`. "
        "Accuracy: solo-learn's online linear classifier on the CIFAR-10 test set after each epoch "
        "(`val_acc1`); times: training seconds, validation excluded (metrics.csv).\n\n",
        study_a(studies.get("study_a_pdim", {}), results),
        study_b(studies.get("study_b_views", {}), results),
        study_c(studies.get("study_c_data", {}), results),
    ]
    runs = [e for s in studies.values() for e in s.values()]
    parts.append("## Runs\n\n")
    if runs:
        parts.append(
            table(
                ["run", "device", "epochs", "training s", "times run", "command"],
                [
                    [
                        e.run.name,
                        e.device,
                        str(len(e.run.rows)),
                        fmt(e.seconds, 0),
                        str(e.count),
                        f"`{e.provenance['launches'][-1]['command']}`" if e.provenance.get("launches") else "-",
                    ]
                    for e in runs
                ],
            )
        )
    else:
        parts.append("No study run yet.\n")
    demo = results / "cpu_demo" / "evaluation.md"
    if demo.is_file():
        parts.append("\n## CPU sanity run (benchmarks/cpu_compare_demo.sh)\n\n" + demo.read_text())
    (results / "report.md").write_text("".join(parts))
    print("".join(parts))


if __name__ == "__main__":
    main()
