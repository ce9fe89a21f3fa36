"""The claims report's plots: backbone kNN against views processed and against seconds, one
line per seed, from the rows :class:`claims.verdicts.Grid` groups."""

from __future__ import annotations

from pathlib import Path
from typing import List, Sequence, Tuple

from .clocks import seconds_per_view, step_times_by_machine
from .verdicts import Grid, Key, setting_label


def plot_seconds(key: Key, rows: Sequence[dict], step_times: Sequence[dict]) -> Tuple[List[float], bool]:
    """The x of the seconds panel: views at the step rate measured side by side when ``step_times``
    has this step (True), else the run's own training seconds (a shared machine's: indicative)."""
    rate = seconds_per_view(step_times, *key[:3])
    if rate is not None:
        return [float(r["views_seen"]) * rate for r in rows], True
    return [float(r["train_seconds"]) for r in rows], False


def plot(grid: Grid, keys: Sequence[Key], path: Path, title: str, step_times: Sequence[dict] = ()) -> None:
    """kNN against views processed and against seconds, one line per seed (the second dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    clocks = set()
    for key in keys:
        for seed, rows in sorted(grid.curves.get(key, {}).items()):
            rows = sorted(rows, key=lambda r: int(r["epoch"]))
            label = setting_label(key) if seed == min(grid.curves[key]) else None
            style = "-" if seed == min(grid.curves[key]) else "--"
            color = f"C{list(keys).index(key)}"
            seconds, measured = plot_seconds(key, rows, step_times)
            clocks.add(measured)
            knn = [float(r["knn_backbone"]) for r in rows]
            axes[0].plot([float(r["views_seen"]) for r in rows], knn, style, color=color, label=label)
            axes[1].plot(seconds, knn, style, color=color, label=label)
    first = next(iter(step_times_by_machine(step_times)), "?")
    xlabel = {
        frozenset({True}): f"seconds at the step rates measured side by side\n({first})",
        frozenset({False}): "training seconds (indicative: shared machine)",
    }.get(frozenset(clocks), "seconds (step rates where measured, else the run's own: mixed)")
    for ax, x in zip(axes, ("views processed", xlabel)):
        ax.set_xlabel(x)
        ax.set_ylabel("backbone kNN top-1 (%)")
        ax.grid(alpha=0.3)
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=7)
    fig.suptitle(title + " (dashed: second seed)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
