"""Side-by-side comparison of pretraining runs from their local files.

Each run folder (solo-learn's layout) holds ``args.json`` and, written by
:class:`~mvssl_plugin.train.run_log.RunLog`, ``metrics.csv``; ``probe.json`` and
``knn.csv`` are picked up when present. Runs of the plugin's methods and of solo-learn's
own compare alike. Outputs: a table (markdown + CSV) and three plots: accuracy vs epoch,
accuracy vs training seconds, and final accuracy vs training seconds with its Pareto front.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from mvssl_plugin.config.beta import beta_of
from mvssl_plugin.config.views import views_of
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.files import atomic_write_text, read_csv, read_json, write_csv
from mvssl_plugin.registry import beta_slot
from mvssl_plugin.runs import ARGS, KNN, METRICS, PROBE, find_run_folders


@dataclass
class Run:
    folder: Path
    name: str
    method: str
    views: int
    pdim: Optional[int]
    beta: Optional[float]
    fraction: float
    rows: List[Dict[str, float]] = field(default_factory=list)
    probe: Optional[dict] = None
    knn_best: Optional[float] = None

    @property
    def label(self) -> str:
        """Method, views, d and data, then the run id, so repeated runs stay apart."""
        fraction = "" if self.fraction >= 1 else f" {self.fraction:.0%} data"
        return f"{self.method} m={self.views} d={self.pdim}{fraction} [{self.folder.name}]"

    def series(self, metric: str, x: str = "epoch") -> tuple[list[float], list[float]]:
        points = [(row[x], row[metric]) for row in self.rows if metric in row and x in row]
        return [p[0] for p in points], [p[1] for p in points]


def _number(text: str) -> Optional[float]:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def is_evaluation(args: dict) -> bool:
    """Linear-evaluation runs (solo-learn's layout too) name the checkpoint they evaluate."""
    return "pretrained_feature_extractor" in args or "pretrain_method" in args


def load_run(folder: Path, args: Optional[dict] = None) -> Run:
    args = read_json(folder / ARGS) if args is None else args
    rows = [
        {k: v for k, v in ((k, _number(v)) for k, v in row.items()) if v is not None}
        for row in read_csv(folder / METRICS)
    ]
    fraction = args.get("data", {}).get("fraction", -1)
    run = Run(
        folder=folder,
        name=str(args.get("name", folder.name)),
        method=str(args.get("method")),
        views=views_of(args).m,
        pdim=args.get("method_kwargs", {}).get("proj_output_dim"),
        beta=beta_of(beta_slot(args.get("method")), args.get("method_kwargs", {})),
        fraction=1.0 if fraction in (None, -1) else float(fraction),
        rows=sorted(rows, key=lambda r: r.get("epoch", 0)),
    )
    run.probe = read_json(folder / PROBE)
    knn = read_csv(folder / KNN)
    run.knn_best = max((float(r["acc1"]) for r in knn), default=None)
    return run


def find_runs(paths: Sequence[str | Path]) -> Tuple[List[Run], List[Path]]:
    """Pretraining run folders among ``paths`` and below them (args.json + metrics.csv), and
    the evaluation runs found beside them (left out: they are no pretraining rows)."""
    folders: List[Path] = []
    for path in map(Path, paths):
        if not path.exists():
            raise ConfigError(f"{str(path)!r} does not exist: pass run folders or a folder above them")
        folders += [f for f in find_run_folders(path) if f not in folders]
    runs, evaluations = [], []
    for folder in folders:
        args = read_json(folder / ARGS)
        if is_evaluation(args):
            evaluations.append(folder)
        else:
            runs.append(load_run(folder, args))
    if not runs:
        raise ConfigError(
            f"no pretraining run folders (args.json + metrics.csv) under {list(map(str, paths))}"
            + (f" (only {len(evaluations)} linear-evaluation run(s))" if evaluations else "")
            + ": runs write metrics.csv beside their checkpoints (checkpoint.enabled=true)"
        )
    return runs, evaluations


def time_to(run: Run, metric: str, target: float) -> Optional[float]:
    """Training seconds at the end of the first epoch whose ``metric`` reached ``target``."""
    for row in run.rows:
        if row.get(metric, float("-inf")) >= target:
            return row.get("train_seconds")
    return None


def summary(runs: Sequence[Run], metric: str, targets: Sequence[float]) -> List[Dict[str, object]]:
    table = []
    for run in runs:
        values = [row[metric] for row in run.rows if metric in row]
        last = run.rows[-1] if run.rows else {}
        entry: Dict[str, object] = {
            "run": run.label,
            "method": run.method,
            "views": run.views,
            "pdim": run.pdim,
            "beta": f"{run.beta:.4g}" if run.beta is not None else "",
            "data": f"{run.fraction:.0%}",
            "epochs": int(last.get("epoch", -1)) + 1,
            "train s": round(last.get("train_seconds", float("nan")), 1),
            f"final {metric}": round(values[-1], 2) if values else "",
            f"best {metric}": round(max(values), 2) if values else "",
        }
        for target in targets:
            reached = time_to(run, metric, target)
            entry[f"s to {target:g}"] = round(reached, 1) if reached is not None else "-"
        if run.probe is not None:
            entry["probe acc1"] = round(run.probe["acc1"], 2)
        if run.knn_best is not None:
            entry["best kNN acc1"] = round(run.knn_best, 2)
        table.append(entry)
    return table


def markdown(table: List[Dict[str, object]]) -> str:
    columns = list(dict.fromkeys(k for row in table for k in row))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row.get(c, "")) for c in columns) + " |" for row in table]
    return "\n".join(lines) + "\n"


def pareto_front(points: Sequence[tuple[float, float]]) -> List[tuple[float, float]]:
    """Points no other point beats on both less time (x) and more accuracy (y), by x."""
    front, best = [], float("-inf")
    for x, y in sorted(points, key=lambda p: (p[0], -p[1])):
        if y > best:
            front.append((x, y))
            best = y
    return front


def plot(runs: Sequence[Run], metric: str, out: Path) -> List[Path]:
    # local: matplotlib loads only to draw (encoder.export imports this module and draws nothing), its
    # Agg backend chosen before pyplot loads
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # local: as matplotlib above

    written = []
    for x, xlabel, name in (
        ("epoch", "epoch", "accuracy_vs_epoch.png"),
        ("train_seconds", "training seconds", "accuracy_vs_time.png"),
    ):
        fig, ax = plt.subplots(figsize=(6, 4))
        for run in runs:
            xs, ys = run.series(metric, x)
            if x == "epoch":
                xs = [v + 1 for v in xs]  # epochs completed
            ax.plot(xs, ys, marker="o", label=run.label)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / name, dpi=120)
        plt.close(fig)
        written.append(out / name)

    fig, ax = plt.subplots(figsize=(6, 4))
    points = []
    for run in runs:
        xs, ys = run.series(metric, "train_seconds")
        if ys:
            points.append((xs[-1], ys[-1]))
            ax.scatter(xs[-1], ys[-1], s=40)
            ax.annotate(run.label, (xs[-1], ys[-1]), fontsize=7, xytext=(4, 4), textcoords="offset points")
    front = pareto_front(points)
    if front:
        ax.step(
            [p[0] for p in front],
            [p[1] for p in front],
            where="post",
            color="grey",
            linestyle="--",
            label="Pareto front",
        )
        ax.legend(fontsize=8)
    ax.margins(x=0.35, y=0.15)  # room for the labels
    ax.set_xlabel("training seconds")
    ax.set_ylabel(f"final {metric}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "pareto.png", dpi=120)
    plt.close(fig)
    written.append(out / "pareto.png")
    return written


def compare(
    paths: Sequence[str | Path], out: str | Path, metric: str = "val_acc1", targets: Sequence[float] = ()
) -> dict:
    """Reads the runs, writes comparison.md / comparison.csv and the plots into ``out``."""
    runs, evaluations = find_runs(paths)
    if evaluations:
        print(f"mvssl compare: left out {len(evaluations)} linear-evaluation run(s): {[str(e) for e in evaluations]}")
    if not any(metric in row for run in runs for row in run.rows):
        available = sorted({k for run in runs for row in run.rows for k in row})
        raise ConfigError(
            f"--metric {metric}: no run logged it (runs without data.val_path log no val_* metric); logged: {available}"
        )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = summary(runs, metric, targets)
    atomic_write_text(out / "comparison.md", markdown(table))
    write_csv(out / "comparison.csv", table)
    plots = plot(runs, metric, out)
    return {"runs": runs, "table": table, "files": [out / "comparison.md", out / "comparison.csv", *plots]}
