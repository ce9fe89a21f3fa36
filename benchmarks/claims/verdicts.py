"""What the claims grid's CSV rows say, setting by setting: the rows grouped by setting
(:class:`Grid`), each setting's final kNN over its seeds, and the verdicts: a setting beats
another (or matches it) beyond the seeds' spread, or reaches the baseline's final kNN in less
time at the step times measured side by side. Rows in, words out; ``claims.report`` sets them
out in summary.md and the README's table (its docstring gives the rules)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

from .clocks import seconds_per_view, step_times_by_machine

Key = Tuple[str, int, int, str, float, int]  # method, m, d, beta, fraction, epochs


def _key(row: dict) -> Key:
    return (row["method"], int(row["m"]), int(row["d"]), row["beta"], float(row["fraction"]), int(row["epochs"]))


def setting_label(key: Key) -> str:
    """A setting as the tables, verdicts and plot legends name it."""
    method, m, d, beta, fraction, _ = key
    text = f"{method} m={m} d={d} {beta}"
    return text + (f" {fraction:.0%} data" if fraction < 1 else "")


class Grid:
    """The CSV rows grouped by setting."""

    def __init__(self, results: List[dict], curves: List[dict]) -> None:
        self.final: Dict[Key, List[dict]] = defaultdict(list)
        for row in results:
            self.final[_key(row)].append(row)
        self.curves: Dict[Key, Dict[int, List[dict]]] = defaultdict(lambda: defaultdict(list))
        epochs = {r["run"]: int(r["epochs"]) for r in results}
        for row in curves:
            # an unfinished run has no results row: its epoch budget is in its name
            budget = epochs.get(row["run"]) or int(row["run"].split("-e")[-1].split("-")[0])
            self.curves[_key({**row, "epochs": budget})][int(row["seed"])].append(row)

    def accuracy(self, key: Key) -> Tuple[Optional[float], Optional[float], int]:
        """(mean final kNN, spread over seeds or None, number of seeds)."""
        values = [float(r["knn_backbone"]) for r in self.final.get(key, [])]
        if not values:
            return None, None, 0
        return statistics.mean(values), (max(values) - min(values) if len(values) > 1 else None), len(values)

    def views(self, key: Key) -> float:
        """Mean views processed by the finished runs of ``key``."""
        return statistics.mean(float(r["views_seen"]) for r in self.final[key])

    def unfinished(self, key: Key) -> List[Tuple[int, int, float]]:
        """(seed, last epoch, its kNN) of each seed whose run has not finished yet."""
        done = {int(r["seed"]) for r in self.final.get(key, [])}
        out = []
        for seed, rows in sorted(self.curves.get(key, {}).items()):
            if seed not in done:
                last = max(rows, key=lambda r: int(r["epoch"]))
                out.append((seed, int(last["epoch"]), float(last["knn_backbone"])))
        return out

    def first_at(self, key: Key, seed: int, target: float) -> Optional[dict]:
        """The first row of ``seed``'s curve at or above ``target``, if any."""
        rows = sorted(self.curves.get(key, {}).get(seed, []), key=lambda r: int(r["epoch"]))
        return next((r for r in rows if float(r["knn_backbone"]) >= target), None)

    def pending(self, key: Key, target: float) -> List[Tuple[int, int, float]]:
        """The :meth:`unfinished` seeds whose curve has not reached ``target`` yet."""
        return [u for u in self.unfinished(key) if self.first_at(key, u[0], target) is None]

    def reach(self, key: Key, target: float) -> Optional[float]:
        """Mean views at which each seed's curve first reaches ``target``; None if a seed's
        finished run never does, or no seed has reached it. A seed still running below ``target``
        (:meth:`pending`) is left out: its first reach is still to come. Views, not the runs' own
        seconds: those depend on the machine each epoch ran on (time comes from step rates)."""
        done = {int(r["seed"]) for r in self.final.get(key, [])}
        hits = []
        for seed in self.curves.get(key, {}):
            hit = self.first_at(key, seed, target)
            if hit is None and seed in done:
                return None
            if hit is not None:
                hits.append(float(hit["views_seen"]))
        return statistics.mean(hits) if hits else None


def _seeds(n: int) -> str:
    """``1 seed``, ``2 seeds``: how many seeds a side of a verdict has."""
    return f"{n} seed{'s' * (n != 1)}"


def accuracy_cell(
    value: Optional[float], spread: Optional[float], seeds: int, running: Sequence[Tuple[int, int, float]] = ()
) -> str:
    """The final kNN over finished seeds, then where each unfinished seed stands."""
    parts = []
    if value is not None:
        half = f" ± {spread / 2:.1f}" if spread is not None else ""
        parts.append(f"{value:.1f}{half} ({_seeds(seeds)})")
    parts += [f"seed {seed} unfinished: {knn:.1f} at epoch {epoch}" for seed, epoch, knn in running]
    return "; ".join(parts) or "not run yet"


def verdict(grid: Grid, better: Key, worse: Key, claim: str, matches: bool = False) -> str:
    """Whether ``better`` beats ``worse`` on final kNN beyond the seeds' spread; with
    ``matches``, whether it is not below it beyond the spread (a claim of equal accuracy)."""
    a, sa, na = grid.accuracy(better)
    b, sb, nb = grid.accuracy(worse)
    if a is None or b is None:
        missing = better if a is None else worse
        state = "has not finished" if grid.unfinished(missing) else "has not run yet"
        return f"inconclusive: {setting_label(missing)} {state}"
    gap = a - b
    if na < 2 or nb < 2:
        return f"inconclusive so far: {gap:+.1f} points, {_seeds(na)} against {nb} ({claim})"
    noise = max(sa or 0.0, sb or 0.0)
    if matches:
        word = "holds" if gap >= -noise else "does not hold"
        return f"{word}: {gap:+.1f} points, seeds' spread {noise:.1f} ({claim}: equal accuracy claimed)"
    if abs(gap) <= noise:
        return f"inconclusive: {gap:+.1f} points, within the seeds' spread of {noise:.1f} ({claim})"
    return f"{'holds' if gap > 0 else 'does not hold'}: {gap:+.1f} points, seeds' spread {noise:.1f} ({claim})"


def time_ratios(
    step_times: Sequence[dict], key: Key, base: Key, views: float, base_views: float
) -> List[Tuple[str, float]]:
    """(machine, x the baseline's time) of ``views`` of ``key`` against ``base_views`` of the
    baseline, for every machine that measured both steps."""
    out = []
    for cpu, rows in step_times_by_machine(step_times).items():
        rate, base_rate = seconds_per_view(rows, *key[:3]), seconds_per_view(rows, *base[:3])
        if rate is not None and base_rate is not None:
            out.append((cpu, views * rate / (base_views * base_rate)))
    return out


def _times(ratios: Sequence[Tuple[str, float]]) -> str:
    """``0.70x`` on one machine; ``0.70x (CPU a), 0.88x (CPU b)`` on several."""
    if len(ratios) == 1:
        return f"{ratios[0][1]:.2f}x"
    return ", ".join(f"{x:.2f}x ({cpu})" for cpu, x in ratios)


Reach = Tuple[float, float, List[Tuple[str, float]]]  # views, x the baseline's views, (machine, x its time)


def time_to_baseline(grid: Grid, base: Key, key: Key, step_times: Sequence[dict]) -> Optional[Reach]:
    """(views, x the baseline's views, x the baseline's time on each machine) at which ``key``
    first reaches the baseline's final kNN (the mean over its seeds); time at the step rates of
    ``step_times.csv``. The baseline's own cost is its whole run: it reaches its final kNN at
    its end (a seed below the mean never reaches the mean, so its curve cannot say). None
    while the baseline has not finished or ``key`` has not reached it."""
    target, _, _ = grid.accuracy(base)
    if target is None:
        return None
    base_views = grid.views(base)
    if key == base:
        views = base_views
    else:
        views = grid.reach(key, target)
        if views is None:
            return None
    return views, views / base_views, time_ratios(step_times, key, base, views, base_views)


def short_of_baseline(grid: Grid, base: Key, key: Key, step_times: Sequence[dict]) -> str:
    """The verdict for a finished setting that never reached the baseline's final kNN: it does
    not hold only if it ends below it by more than the seeds' spread (2 seeds a side)."""
    target, base_spread, base_seeds = grid.accuracy(base)
    final, spread, seeds = grid.accuracy(key)
    views, base_views = grid.views(key), grid.views(base)
    ratios = time_ratios(step_times, key, base, views, base_views)
    spent = f"{views / base_views:.2f}x the baseline's views"
    if ratios:
        spent += f", {_times(ratios)} its time"
    where = f"ends at {final:.1f}% ({final - target:+.1f} against the baseline's {target:.1f}%) after {spent}"
    if seeds < 2 or base_seeds < 2:
        return f"inconclusive so far: {where}; {_seeds(seeds)}, the baseline {base_seeds}"
    noise = max(spread or 0.0, base_spread or 0.0)
    if target - final <= noise:
        return f"inconclusive: {where}, within the seeds' spread of {noise:.1f}"
    return f"does not hold: {where}, seeds' spread {noise:.1f}"


def views_verdict(grid: Grid, base: Key, key: Key, step_times: Sequence[dict]) -> str:
    """The views claim for ``key``: it reaches the baseline's final kNN in less time, on every
    machine whose step times were measured; where machines disagree it depends on the CPU."""
    target, _, _ = grid.accuracy(base)
    if target is None:
        return "inconclusive: the baseline has not finished"
    found = time_to_baseline(grid, base, key, step_times)
    waiting = grid.pending(key, target)

    def running(seeds: Sequence[Tuple[int, int, float]]) -> str:
        return "".join(f"; seed {seed} unfinished: {knn:.1f}% at epoch {epoch}" for seed, epoch, knn in seeds)

    if found is None:
        if key in grid.final:  # a finished seed never reached it
            return short_of_baseline(grid, base, key, step_times) + running(grid.unfinished(key))
        return f"inconclusive: not finished, not at {target:.1f}% yet" if grid.unfinished(key) else "not run yet"
    _, views_x, ratios = found
    seeds, base_seeds = len(grid.curves.get(key, {})) - len(waiting), len(grid.final[base])  # each reached it
    # a seed still running below the target leaves the verdict to the seeds that have reached it
    how = f"({_seeds(seeds)}; the baseline {base_seeds}{running(waiting)})"
    if not ratios:
        return f"in views {views_x:.2f}x the baseline's; time not measured {how}"
    faster = {x < 1 for _, x in ratios}
    word = "depends on the CPU" if len(faster) > 1 else "holds" if faster == {True} else "does not hold"
    word += " so far" if min(seeds, base_seeds) < 2 else ""
    return f"{word}: {_times(ratios)} the baseline's time, {views_x:.2f}x its views {how}"
