"""What a run's kNN curve says at a step time, rows in and rows out (no files, no clock of its
own): seconds to each kNN target, kNN at each time budget, and from them the rows of the records,
of the levers at equal seconds and of the peer target, which ``speedrun_report`` writes."""

from __future__ import annotations

import statistics
from typing import Dict, List, Optional, Sequence, Tuple

from speedrun_clock import StepTime
from speedrun_settings import Lever, seed_of

#: kNN targets (percent) of the records table
TARGETS = (50, 55, 60, 65, 70)
#: the records' two time budgets (seconds)
BUDGETS = {"30 min": 1800.0, "2 h": 7200.0}


def curve_of(curves: Sequence[dict], run: str) -> List[dict]:
    """A run's rows of curves.csv, by epoch."""
    return sorted((r for r in curves if r["run"] == run), key=lambda r: int(r["epoch"]))


def seconds_to(curve: Sequence[dict], target: float, step_seconds: float) -> Optional[float]:
    """Seconds (steps x ``step_seconds``) at the end of the first epoch whose kNN reaches
    ``target``; None when no epoch does."""
    for row in curve:
        if float(row["knn_backbone"]) >= target:
            return int(row["step"]) * step_seconds
    return None


def knn_at(curve: Sequence[dict], seconds: float, step_seconds: float) -> Optional[float]:
    """kNN of the encoder one has after ``seconds`` of training: the last epoch that ended within
    them. None when no epoch did, or when the run ended more than an epoch before ``seconds`` (a
    30-minute run has no figure at 2 hours)."""
    if curve:
        end, steps = int(curve[-1]["step"]) * step_seconds, int(curve[-1]["step"]) / int(curve[-1]["epoch"])
        if end + steps * step_seconds < seconds:
            return None
    within = [r for r in curve if int(r["step"]) * step_seconds <= seconds]
    return float(within[-1]["knn_backbone"]) if within else None


def knn_interpolated(curve: Sequence[dict], seconds: float, step_seconds: float) -> Optional[float]:
    """kNN at ``seconds``, linear between the epochs around it (the run's start counts as
    10%, chance); None past the run's last epoch."""
    points = [(0.0, 10.0)] + [(int(r["step"]) * step_seconds, float(r["knn_backbone"])) for r in curve]
    for (t0, k0), (t1, k1) in zip(points, points[1:]):
        if t0 <= seconds <= t1:
            return k0 if t1 == t0 else k0 + (k1 - k0) * (seconds - t0) / (t1 - t0)
    return None


def record_rows(
    runs: Sequence[Tuple[str, str, str, int]],
    curves: Sequence[dict],
    steps: Dict[str, StepTime],
    details: Dict[str, dict],
) -> List[dict]:
    """One row per finished run (``runs``: run, setting, recipe with overrides, seed) and machine
    with a step time for its setting (``steps``: setting -> StepTime on the machine of interest)."""
    rows = []
    for run, setting, recipe, seed in runs:
        step = steps.get(setting)
        curve = curve_of(curves, run)
        if step is None or not curve:
            continue
        row = {
            "run": run,
            "setting": setting,
            "recipe": recipe,
            "seed": seed,
            "epochs": int(curve[-1]["epoch"]),
            "commit": details.get(run, {}).get("commit", ""),
            "trained_on": details.get(run, {}).get("cpu", ""),
            "precision": details.get(run, {}).get("precision", ""),
            "timed_on": step.machine,
            "timed_precision": step.precision,
            "s_per_step": round(step.seconds, 4),
            "basis": step.basis,
            "final_knn": float(curve[-1]["knn_backbone"]),
            "final_seconds": round(int(curve[-1]["step"]) * step.seconds, 1),
        }
        for target in TARGETS:
            reached = seconds_to(curve, target, step.seconds)
            row[f"s_to_{target}"] = "" if reached is None else round(reached, 1)
        for label, budget in BUDGETS.items():
            knn = knn_at(curve, budget, step.seconds)
            row[f"knn_at_{label.replace(' ', '')}"] = "" if knn is None else knn
        rows.append(row)
    return rows


def speedup_rows(records: Sequence[dict], curves: Sequence[dict], peer: str, ours: str) -> List[dict]:
    """The peer target, per machine and seed (``records``: :func:`record_rows`' rows): the seconds each
    of the ``peer`` setting's run and ``ours`` took to the peer's final kNN, by one rule for both (the
    end of the first epoch at or above it: a peer that passed its final kNN before its last epoch is
    timed there). ``ours``'s shortest run of the seed stands for all of them (a longer run of a
    constant lr goes on from it: the same epochs). ``speedup`` = peer / ours; empty where ours never
    reached it."""
    rows = []
    for p in (r for r in records if r["setting"] == peer):
        mates = [
            r for r in records if r["setting"] == ours and r["timed_on"] == p["timed_on"] and r["seed"] == p["seed"]
        ]
        target = float(p["final_knn"])
        peers = seconds_to(curve_of(curves, p["run"]), target, float(p["s_per_step"]))
        for o in sorted(mates, key=lambda r: int(r["epochs"]))[:1]:
            reached = seconds_to(curve_of(curves, o["run"]), target, float(o["s_per_step"]))
            rows.append({
                "timed_on": p["timed_on"],
                "seed": p["seed"],
                "peer_run": p["run"],
                "peer_final_knn": p["final_knn"],
                "peer_seconds": round(peers, 1),
                "ours_run": o["run"],
                "ours_seconds": "" if reached is None else round(reached, 1),
                "speedup": "" if reached is None else round(peers / reached, 2),
            })  # fmt: skip
    return rows


def lever_rows(
    levers: Sequence[Lever],
    runs: Dict[str, List[str]],
    curves: Sequence[dict],
    steps: Dict[str, StepTime],
    longer: Optional[Dict[str, List[str]]] = None,
) -> List[dict]:
    """Per lever: each side's mean final kNN over its finished seeds, and the gain in points at
    equal seconds: the changed side's final kNN against the reference's at the same seconds
    (interpolated between its epochs), or, where the reference ended sooner, both at the
    reference's last seconds. ``runs``: setting -> its finished runs; ``longer``:
    setting -> runs whose first epochs are those runs' (a setting without a schedule: its longer
    runs, shortest first). Each reference seed is read from its shortest run that reaches the
    changed side's seconds, the screen first: a longer run finishing later must not move a gain
    that shorter runs already measured."""
    out = []
    for lever in levers:
        a, b = runs.get(lever.changed, []), runs.get(lever.reference, [])
        step_a, step_b = steps.get(lever.changed), steps.get(lever.reference)
        if not a or not b or step_a is None or step_b is None:
            continue
        by_seed: Dict[str, List[List[dict]]] = {}  # seed -> its curves, the screen first
        for r in b + [r for r in (longer or {}).get(lever.reference, []) if r not in b]:
            by_seed.setdefault(seed_of(r), []).append(curve_of(curves, r))
        gains, finals_a, finals_b = [], [], []
        for run in a:
            curve = curve_of(curves, run)
            seconds = int(curve[-1]["step"]) * step_a.seconds
            finals_a.append(float(curve[-1]["knn_backbone"]))
            for refs in by_seed.values():
                knn_ref = next(
                    (k for k in (knn_interpolated(ref, seconds, step_b.seconds) for ref in refs) if k is not None), None
                )
                if knn_ref is not None:
                    gains.append(finals_a[-1] - knn_ref)
                else:  # the reference ended sooner: both at its longest run's last epoch's seconds
                    ref = max(refs, key=lambda c: int(c[-1]["step"]))
                    ref_end = int(ref[-1]["step"]) * step_b.seconds
                    gains.append(knn_interpolated(curve, ref_end, step_a.seconds) - float(ref[-1]["knn_backbone"]))
        for run in b:
            finals_b.append(float(curve_of(curves, run)[-1]["knn_backbone"]))
        out.append(
            {
                "lever": lever.name,
                "changed": lever.changed,
                "reference": lever.reference,
                "what": lever.what,
                "seeds_changed": len(a),
                "seeds_reference": len(b),
                "knn_changed": round(statistics.mean(finals_a), 2),
                "knn_reference": round(statistics.mean(finals_b), 2),
                "step_ratio": round(step_a.seconds / step_b.seconds, 3),
                "seconds_changed": round(int(curve_of(curves, a[0])[-1]["step"]) * step_a.seconds, 1),
                "gain_points_equal_seconds": round(statistics.mean(gains), 2) if gains else "",
                "spread_changed": round(max(finals_a) - min(finals_a), 2) if len(a) > 1 else "",
                "timed_on": step_a.machine,
                "basis": step_a.basis if step_a.basis == step_b.basis else f"{step_a.basis}; {step_b.basis}",
            }
        )
    return out


def untimed_rows(
    levers: Sequence[Lever], runs: Dict[str, List[str]], curves: Sequence[dict], timed: Sequence[str]
) -> List[dict]:
    """The levers both of whose sides have finished but whose steps are not timed on any machine
    (``timed``: the settings with a step time): each side's mean final kNN and the difference
    at equal epochs, which is equal seconds only where the two steps cost the same."""
    out = []
    for lever in levers:
        a, b = runs.get(lever.changed, []), runs.get(lever.reference, [])
        if not a or not b or (lever.changed in timed and lever.reference in timed):
            continue
        knn_a = statistics.mean(float(curve_of(curves, r)[-1]["knn_backbone"]) for r in a)
        knn_b = statistics.mean(float(curve_of(curves, r)[-1]["knn_backbone"]) for r in b)
        untimed = [s for s in (lever.changed, lever.reference) if s not in timed]
        out.append(
            {
                "lever": lever.name,
                "what": lever.what,
                "changed": lever.changed,
                "reference": lever.reference,
                "seeds": f"{len(a)} / {len(b)}",
                "knn_changed": round(knn_a, 2),
                "knn_reference": round(knn_b, 2),
                "gain_points_equal_epochs": round(knn_a - knn_b, 2),
                "step_not_timed": ", ".join(untimed),
            }
        )
    return out
