"""What a run's time is: the pauses taken off an epoch, the harness's own clock for its budget,
``--until``, the machine and commit each row names, step times measured side by side (the only
seconds a wall-clock claim is made from), and a run's minutes estimated before it starts."""

from __future__ import annotations

import logging
import platform
import statistics
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from step_clock import run_setting

from mvssl_plugin.config.hardware import cpu_bf16_native, cpu_precision, usable_cores
from mvssl_plugin.files import read_csv, write_csv

from .grid import REPO, Point, Scale, step_settings, width_of

# ----------------------------------------------------------------------------- pauses


def pause_overlap(log: Optional[Path], start: float, end: float) -> float:
    """Seconds of [start, end] (unix time) that the pause log marks as paused. Lines that are
    not ``<unix time> stop|cont ...`` (a comment, a half-written line) are skipped: the log is
    written by hand-made tools, and a bad line must not end a run hours in."""
    if log is None or not log.is_file():
        return 0.0
    total, stopped = 0.0, None
    for line in log.read_text().splitlines():
        parts = line.split()
        try:
            when, what = float(parts[0]), parts[1]
        except (IndexError, ValueError):
            continue
        if what == "stop" and stopped is None:
            stopped = when
        elif what == "cont" and stopped is not None:
            total += max(0.0, min(end, when) - max(start, stopped))
            stopped = None
    if stopped is not None:
        total += max(0.0, end - max(start, stopped))
    return total


class EpochPauses:
    """The paused seconds of the running epoch, kept across a stop inside it: a stopped run's
    checkpoint carries the pauses of the epoch's first part (``state``), and the resumed epoch
    adds them to its own, so the epoch's training seconds lose every pause, not only those
    after the resume. Tagged with the epoch, so a checkpoint written at an epoch's end does not
    carry that epoch's pauses into the next."""

    def __init__(self, log: Optional[Path]) -> None:
        self.log = log
        self.epoch: Optional[int] = None
        self.start: Optional[float] = None
        self.carried = 0.0  # pauses of this epoch before a stop (from the checkpoint)
        self.carried_epoch: Optional[int] = None

    def begin(self, epoch: int, now: float) -> None:
        self.epoch, self.start = epoch, now

    def so_far(self, now: float) -> float:
        """Paused seconds of the running epoch up to ``now``, the part before a stop included."""
        own = pause_overlap(self.log, self.start, now) if self.start is not None else 0.0
        return own + (self.carried if self.carried_epoch == self.epoch else 0.0)

    def end(self, now: float) -> float:
        """The epoch's paused seconds; the carried part is used once."""
        paused = self.so_far(now)
        self.start, self.carried, self.carried_epoch = None, 0.0, None
        return paused

    def state(self, now: float) -> dict:
        if self.start is None:
            return {}
        return {"epoch": self.epoch, "paused_seconds": self.so_far(now)}

    def load(self, state: dict) -> None:
        if "epoch" in state:
            self.carried, self.carried_epoch = float(state["paused_seconds"]), int(state["epoch"])


# ----------------------------------------------------------------------------- the harness's clocks


class ActiveClock:
    """Seconds this process ran, not counting the time it was stopped (SIGSTOP to its group).

    Read often (every ``poll`` seconds); a gap between two reads longer than ``2 * poll`` is
    taken for a pause and counts as ``poll``."""

    def __init__(self, poll: float = 5.0, now=time.monotonic) -> None:
        self.poll, self.now = poll, now
        self.last, self.active = now(), 0.0

    def read(self) -> float:
        t = self.now()
        gap, self.last = t - self.last, t
        self.active += gap if gap <= 2 * self.poll else self.poll
        return self.active


#: the wall clock ``--until`` is read against (a test moves it)
wall_clock = time.time


def parse_until(text: str, now: float) -> float:
    """``HH:MM`` -> the next such time on this machine's clock, as seconds since the epoch."""
    try:
        hour, minute = (int(part) for part in text.split(":"))
        if not (0 <= hour < 24 and 0 <= minute < 60):
            raise ValueError
    except ValueError:
        raise ValueError(f"--until takes HH:MM on this machine's 24-hour clock (e.g. 05:45), got {text!r}") from None
    today = time.localtime(now)
    at = time.mktime((today.tm_year, today.tm_mon, today.tm_mday, hour, minute, 0, 0, 0, -1))
    return at if at > now else at + 24 * 3600


def run_spans(curves: Sequence[dict], machine: Optional[str] = None) -> List[Tuple[dict, dict]]:
    """Per run, (the row before its span, its span's last row): its cumulative clocks' start
    and end. The span is the whole run, or with ``machine`` the run's last epochs measured on
    that machine (its ``cpu`` column); runs with no epoch there are left out."""
    by_run: Dict[str, List[dict]] = {}
    for r in curves:
        by_run.setdefault(r["run"], []).append(r)
    zero = {"train_seconds": "0", "views_seen": "0"}
    spans = []
    for rows in by_run.values():
        rows.sort(key=lambda r: int(r["epoch"]))
        if machine is not None:
            here = [i for i, r in enumerate(rows) if r.get("cpu") == machine]
            if not here:
                continue
            end = here[-1]
            start = end
            while start > 0 and rows[start - 1].get("cpu") == machine:
                start -= 1
            spans.append((rows[start - 1] if start else zero, rows[end]))
        else:
            spans.append((zero, rows[-1]))
    return spans


def estimate_minutes(
    point: Point, curves: Sequence[dict], step_times: Sequence[dict] = (), machine: Optional[str] = None
) -> Optional[float]:
    """Minutes a run of ``point`` takes, training and per-epoch evaluation: training seconds
    per view and evaluation seconds per epoch (the medians over runs) from the runs in
    ``curves`` with the same width, method and d (any run of that width when none has them;
    of any width when none has that width). With ``machine`` (``cpu_description()``), only the
    epochs measured on that machine count, where it has any: an AVX2-only CPU in fp32 takes
    about twice a bf16 CPU's time, and an estimate from the faster one would start runs the
    slower cannot finish. A run of another setting is scaled by the two steps' seconds per
    view in ``step_times`` (this machine's, where it measured them) where both are measured,
    else by the width squared (the convolutions' work); None when ``curves`` holds no run."""
    spans = run_spans(curves, machine) or run_spans(curves)
    width = [s for s in spans if width_of(s[1]["run"]) == point.width]
    same = [s for s in width if s[1]["method"] == point.method and int(s[1]["d"]) == point.d]
    spans = same or width or spans
    if not spans:
        return None
    step_times = step_times_by_machine(step_times).get(machine) or step_times  # this machine's ratios
    mine = seconds_per_view(step_times, point.method, point.m, point.d, point.width)

    def factor(r: dict) -> float:
        theirs = None
        if mine is not None:
            theirs = seconds_per_view(
                step_times, r["method"], int(r["m"]), int(r["d"]), width_of(r["run"], point.scale_width)
            )
        if mine is not None and theirs is not None:
            return mine / theirs
        return (point.width / width_of(r["run"], point.scale_width)) ** 2

    def eval_factor(r: dict) -> float:  # the evaluation embeds the same images whatever m and d
        return factor(r) if width_of(r["run"], point.scale_width) != point.width else 1.0

    def seconds_per_view_of(before: dict, last: dict) -> float:
        seconds = float(last["train_seconds"]) - float(before["train_seconds"])
        return seconds / (float(last["views_seen"]) - float(before["views_seen"]))

    middle = len(spans) // 2
    per_view = sorted(factor(last) * seconds_per_view_of(before, last) for before, last in spans)[middle]
    per_epoch_eval = sorted(eval_factor(last) * float(last["eval_seconds"] or 0) for _, last in spans)[middle]
    views = point.epochs * point.m * point.fraction * 50_000
    return (views * per_view + point.epochs * per_epoch_eval) / 60


# ----------------------------------------------------------------------------- machines and step times


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_description(accelerator: str = "cpu") -> str:
    """The machine a row was measured on (the ``cpu`` column): the CPU model, or the GPU's on a GPU."""
    if accelerator == "gpu":
        import torch  # local: a CPU machine's description needs no torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU visible"

    native, _ = cpu_bf16_native()
    model = platform.processor() or platform.machine()
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    return f"{model}, {machine_kind(usable_cores(), native)}"


def machine_kind(cores: int, bf16_native: bool) -> str:
    """The end of a machine's description (:func:`cpu_description`): what its step times depend on
    besides the model, its cores and whether it computes bf16 natively."""
    return f"{cores} cores, bf16 {'native' if bf16_native else 'not native'}"


def step_times_by_machine(step_times: Sequence[dict]) -> Dict[str, List[dict]]:
    """``step_times.csv``'s rows by the machine that measured them (its ``cpu`` column), in the
    file's order. Which step is cheaper per view depends on the CPU, so every machine gets its
    own time ratio in a verdict; seconds in tables and plots are the first machine's."""
    out: Dict[str, List[dict]] = {}
    for row in step_times:
        out.setdefault(row.get("cpu") or "?", []).append(row)
    return out


def seconds_per_view(
    step_times: Sequence[dict], method: str, m: int, d: int, width: Optional[int] = None
) -> Optional[float]:
    """Seconds one view of this training step takes (batch 128) on the first machine of
    ``step_times``; of any width when ``width`` is None (the report's rows have the grid's
    width only); None where it was not measured."""
    rows = next(iter(step_times_by_machine(step_times).values()), [])
    for row in rows:
        if (row["method"], int(row["m"]), int(row["d"])) == (method, m, d) and width in (None, int(row["width"])):
            return float(row["s_per_step"]) / (128 * m)
    return None


def measure_step_times(scale: Scale, rounds: int, steps: int) -> List[dict]:
    """Seconds per training step of every distinct step of the grid, measured side by side:
    the settings alternate within each round, so all see the same machine. Run it alone on
    the machine (nothing else training). It replaces this machine's rows of ``step_times.csv``
    and keeps other machines' (the report gives each its own time ratios), in their order."""
    import torch  # local: --list and --report need no torch

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    settings = step_settings(scale)
    times: Dict[str, List[float]] = {p.name(1): [] for p, _, _ in settings}
    out = Path(tempfile.mkdtemp())
    for round_ in range(rounds):
        for point, recipe, extra in settings:
            times[point.name(1)] += run_setting(extra, steps, out, False, recipe=recipe)
            print(f"cpu_claims: step times, round {round_ + 1}/{rounds}: {point.name(1)}", flush=True)
    machine, made = cpu_description(scale.accelerator), commit()
    rows = []
    for point, _, _ in settings:
        step = statistics.median(times[point.name(1)])
        rows.append(
            {
                "method": point.method,
                "m": point.m,
                "d": point.d,
                "width": point.width,
                "precision": cpu_precision()[0] if scale.precision == "auto" else scale.precision,
                "steps": len(times[point.name(1)]),
                "s_per_step": round(step, 4),
                "views_per_s": round(128 * point.m / step, 1),
                "threads": torch.get_num_threads(),
                "cpu": machine,
                "commit": made,
                "date": time.strftime("%Y-%m-%d %H:%M"),
            }
        )
    by_machine = step_times_by_machine(read_csv(scale.step_times))
    by_machine[machine] = rows  # in place when this machine measured before, else last
    write_csv(scale.step_times, [r for group in by_machine.values() for r in group])
    print("| method | m | d | width | s / step | views / s |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['method']} | {r['m']} | {r['d']} | {r['width']} | {r['s_per_step']} | {r['views_per_s']} |")
    return rows
