"""The speedrun's modelled clock: each setting's seconds per step on a named machine, from the
step times the retired speedrun harness measured (``steps.csv``: every setting's step beside the
claims baseline's, alternating within each round) and the claims grid's: measured there, the
claims grid's same step, or a ratio measured elsewhere times its anchor's step there
(``StepTime.basis`` says which). The report's time is steps x these seconds, never a run's own
wall-clock."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Dict, Iterable, Optional, Sequence

from speedrun_settings import BASELINE, FULL_SIDE, REFERENCE, SETTINGS, Setting


@dataclass(frozen=True)
class StepTime:
    """Seconds of one training step of a setting on a machine, and where the figure comes from."""

    seconds: float
    machine: str
    precision: str
    basis: str  # measured | claims grid's step | ratio to the baseline measured on <machine>


def side_tag(tag: str, side: int) -> str:
    """``steps.csv``'s name of a ramp setting's step at one side (``ramp@16``)."""
    return f"{tag}@{side}"


def ramp_step(tag: str, steps: Dict[str, StepTime]) -> Optional[StepTime]:
    """A ramp setting's step over its screen: the mean of its epochs' steps (every epoch has the
    same steps), each side's own step (the full side's: the recipe's, which it is but for the ramp). Exact
    for the screen's total seconds, which is what its lever reads; its epochs in between are
    placed at that mean (the early, smaller epochs took less). None until every side is timed."""
    s = SETTINGS[tag]
    sides = s.sides(s.screen_epochs)
    by_side = {side: steps.get(side_tag(tag, side) if side != FULL_SIDE else REFERENCE) for side in sides}
    if any(step is None for step in by_side.values()):
        return None
    parts = [by_side[side] for side in sides]
    bases = sorted({p.basis for p in parts})
    return StepTime(
        statistics.mean(p.seconds for p in parts),
        parts[0].machine,
        parts[0].precision,
        f"mean of its epochs' sides {'/'.join(map(str, sides))} px ({'; '.join(bases)})",
    )


def same_work(a: Setting, b: Setting) -> bool:
    """Whether two settings train the same network on the same views (their steps cost the same)."""
    return (a.method, a.m, a.d, a.width_factor, a.recipe) == (b.method, b.m, b.d, b.width_factor, b.recipe)


def same_step(a: Setting, b: Setting) -> bool:
    """Whether one's measured step stands for the other's: the same work with Adam at the grid's
    batch (a schedule, the lr, the crops' scale or beta change no work of the step), or two ramps
    of the same work from the same side. LARS or another batch is timed on its own."""
    if a.resolution_start != b.resolution_start or not same_work(a, b):
        return False
    return a.resolution_start is not None or (a.grid_step and b.grid_step)


def beside_reference(name: str, machine: str, own: Sequence[dict], reference: Optional[StepTime]) -> Optional[StepTime]:
    """``name`` (a setting, or the claims baseline) timed on ``machine`` in a call (one date of
    ``own``, steps.csv's rows) that timed the reference too, where the reference has several calls
    there: the two's ratio in its latest such call (a call again supersedes one before) x the
    reference's step there (``reference``: its median). A step on the Xeon moved by a third between
    quiet calls, any setting's, so a cost is a ratio measured side by side, on one scale. None
    where the reference has fewer than two calls there (the step as measured is that ratio)."""
    calls = [r for r in own if r["setting"] == REFERENCE and r["cpu"] == machine]
    dates = [c.get("date") for c in calls]
    rows = [r for r in own if r["setting"] == name and r["cpu"] == machine and r.get("date") in dates]
    if name == REFERENCE or not rows or len(calls) < 2 or reference is None:
        return None
    r = rows[-1]
    mate = [c for c in calls if c.get("date") == r.get("date")]
    ratio = float(r["s_per_step"]) / float(mate[-1]["s_per_step"])
    basis = f"its ratio to the {REFERENCE} in its call x the {REFERENCE}'s median"
    return StepTime(ratio * reference.seconds, machine, r["precision"], basis)


def step_times_on(machine: str, own: Sequence[dict], claims: Sequence[dict]) -> Dict[str, StepTime]:
    """setting -> its step time on ``machine``: measured there (``own``: the speedrun's
    steps.csv), else the claims grid's step where the setting's step is one of the grid's
    (``claims``: its step_times.csv), else its ratio to its anchor (``Setting.anchor``: the
    recipe it changes one thing of, or the claims baseline), measured on the first machine that
    measured it, times the anchor's step on ``machine``. Where the reference was timed here in
    several calls, its step is their median, and a setting timed in a call beside it is their
    ratio in that call x that median (:func:`beside_reference`). A ratio to the recipe keeps a change that
    costs nothing at no cost; one to the baseline would carry over how the baseline's d = 2048
    projector weighs against the recipe's on the other machine (0.67 on the AVX2 EPYC in fp32,
    0.59 on the bf16 one). A resolution ramp: the mean of its sides' (``ramp_step``)."""
    here = {r["setting"]: r for r in own if r["cpu"] == machine}  # rows in time order: the latest stays
    grid = {(r["method"], int(r["m"]), int(r["d"]), int(r["width"])): r for r in claims if r["cpu"] == machine}
    base = grid.get((BASELINE.method, BASELINE.m, BASELINE.d, BASELINE.width))
    anchors: Dict[str, StepTime] = {}
    if base is not None:
        anchors["baseline"] = StepTime(float(base["s_per_step"]), machine, base["precision"], "claims grid's step")
    out: Dict[str, StepTime] = {}

    def by_ratio(tag: str, anchor: str) -> Optional[StepTime]:
        """``tag``'s ratio to ``anchor`` on the first machine that measured it (its latest
        round there) x the anchor's step on ``machine``. The anchor's ratio to the baseline is
        the same round's where it was timed in it, else its median over that machine's rounds:
        a ratio from two rounds carries their 5-10% drift."""
        rows = [r for r in own if r["setting"] == tag]
        if not rows:
            return None
        row = [r for r in rows if r["cpu"] == rows[0]["cpu"]][-1]
        mates = [float(r["ratio_to_baseline"]) for r in own if r["setting"] == anchor and r["cpu"] == row["cpu"]]
        beside = [
            r for r in own if r["setting"] == anchor and r["cpu"] == row["cpu"] and r.get("date") == row.get("date")
        ]
        if anchor != "baseline" and (not mates or anchor not in out):
            anchor = "baseline"  # the anchor not measured on that machine, or unknown here
        basis = f"ratio to the {anchor} on {row['cpu']}"
        if anchor == "baseline":
            if "baseline" not in anchors:
                return None
            ratio, step = float(row["ratio_to_baseline"]), anchors["baseline"]
        else:  # both ratios to the baseline of their own round: the baseline's drift cancels
            mate = float(beside[-1]["ratio_to_baseline"]) if beside else statistics.median(mates)
            ratio, step = float(row["ratio_to_baseline"]) / mate, out[anchor]
            basis += "" if beside else f" (the {anchor}'s median over {len(mates)} rounds)"
        return StepTime(ratio * step.seconds, machine, step.precision, basis)

    calls = [r for r in own if r["setting"] == REFERENCE and r["cpu"] == machine]  # one row per call

    def measured(name: str, of: Optional[str] = None) -> Optional[StepTime]:
        """``name``'s own step here: its latest call's; the reference's, its median over calls."""
        r = here.get(name)
        if r is None:
            return None
        seconds, basis = float(r["s_per_step"]), "measured"
        if name == REFERENCE and len(calls) > 1:
            seconds = statistics.median(float(c["s_per_step"]) for c in calls)
            basis = f"median of {len(calls)} calls"
        return StepTime(seconds, machine, r["precision"], basis if of is None else f"{of}'s step, {basis}")

    def beside(name: str) -> Optional[StepTime]:
        return beside_reference(name, machine, own, out.get(REFERENCE))

    def first(steps: Iterable[Optional[StepTime]]) -> Optional[StepTime]:
        return next((step for step in steps if step is not None), None)

    def same_work_step(s: Setting) -> Optional[StepTime]:
        """A measured setting's step that does the same work (a schedule, the augmentation's
        scale or beta change no work of the step)."""
        return first(measured(t, t) for t in here if t in SETTINGS and same_step(SETTINGS[t], s))

    def grid_step(s: Setting) -> Optional[StepTime]:
        r = grid.get((s.method, s.m, s.d, 16)) if s.grid_step else None
        return None if r is None else StepTime(float(r["s_per_step"]), machine, r["precision"], "claims grid's step")

    # plain settings first, in SETTINGS' order (an anchor before what it anchors); then each
    # ramp from its sides, timed like plain settings against the same anchor
    for tag, s in SETTINGS.items():
        if s.ramp() is not None:
            continue
        if step := beside(tag) or measured(tag) or same_work_step(s) or grid_step(s) or by_ratio(tag, s.anchor):
            out[tag] = step
    for tag, s in SETTINGS.items():
        if s.ramp() is None:
            continue
        twins = [t for t, o in SETTINGS.items() if t != tag and same_step(o, s)]
        for side in set(s.sides(s.screen_epochs)) - {FULL_SIDE}:
            name, others = side_tag(tag, side), [side_tag(t, side) for t in twins]
            # its own side measured here, else a twin's; then its own ratio, else a twin's
            step = beside(name) or measured(name) or first(beside(n) or measured(n, n) for n in others)
            if step := step or by_ratio(name, s.anchor) or first(by_ratio(n, s.anchor) for n in others):
                out[name] = step
        if (step := ramp_step(tag, out)) is not None:
            out[tag] = step
    return out


def baseline_step(machine: str, own: Sequence[dict], claims: Sequence[dict]) -> Optional[StepTime]:
    """The claims baseline's step on ``machine``: measured there beside the settings (``steps.csv``'s
    ``baseline``, its latest round; where the reference was timed in several calls, timed as every
    setting is, by :func:`beside_reference`), else the claims grid's own; None where neither."""
    key = (BASELINE.method, str(BASELINE.m), str(BASELINE.d), str(BASELINE.width))
    mine = next((r for r in reversed(own) if r["cpu"] == machine and r["setting"] == "baseline"), None)  # latest
    grid = next((r for r in claims if r["cpu"] == machine and (r["method"], r["m"], r["d"], r["width"]) == key), None)
    if mine is None and grid is None:
        return None
    reference = step_times_on(machine, own, claims).get(REFERENCE) if mine else None
    if (step := beside_reference("baseline", machine, own, reference)) is not None:
        return step
    r = mine or grid
    basis = "measured beside the settings" if mine else "claims grid's step"
    return StepTime(float(r["s_per_step"]), machine, r["precision"], basis)
