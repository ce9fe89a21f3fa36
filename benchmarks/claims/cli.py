"""``cpu_claims.py``'s options that run the grid in resumable pieces within a budget, and the
steps it takes with them; ``cpu_claims.py`` adds its own (the list, the report) and dispatches."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Optional, Sequence, Tuple

from step_clock import cifar_root

from . import clocks
from .grid import Point, Scale
from .runner import run_grid


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The budget, the clock, pauses, step timing, the data and the child's one-run option."""
    parser.add_argument("--budget-min", type=float, help="run the next runs for this many minutes")
    parser.add_argument("--until", help="HH:MM: stop by then on this machine's clock, pauses or not")
    parser.add_argument(
        "--start-anyway",
        action="store_true",
        help="start a run the budget may not finish, even one too large to carry (it resumes here next call)",
    )
    parser.add_argument("--rounds", type=int, default=2, help="--step-times: rounds (settings alternate)")
    parser.add_argument("--steps", type=int, default=12, help="--step-times: timed steps per setting and round")
    parser.add_argument("--pause-log", type=Path, help="pause log (cpu_claims.py's docstring)")
    parser.add_argument("--pgid-file", type=Path, help="write this process group's id here (for pausing)")
    parser.add_argument("--data", type=Path, help="CIFAR-10 ImageFolder root (train/, test/); else CIFAR10_DIR")
    parser.add_argument("--run", help=argparse.SUPPRESS)  # the child: one run


def parse_run_arguments(
    parser: argparse.ArgumentParser, argv: Optional[Sequence[str]]
) -> Tuple[argparse.Namespace, Optional[float]]:
    """Parses ``argv``; returns the options and ``--until`` as a wall-clock time. A bad
    ``--until`` or a ``--data`` folder without CIFAR-10 stops here, before any work."""
    args = parser.parse_args(argv)
    until = None
    if args.until is not None:
        try:
            until = clocks.parse_until(args.until, clocks.wall_clock())
        except ValueError as error:
            parser.error(str(error))
    if args.data is not None:
        os.environ["CIFAR10_DIR"] = str(args.data.resolve())  # the children inherit it
        cifar_root()
    return args, until


#: the options that only shape the runs a budget starts
RUN_OPTIONS = ("only", "start_anyway", "pause_log", "pgid_file")


def no_action(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """No action was asked for. Options that only shape a budget's runs (``--only``,
    ``--start-anyway``, ``--pause-log``, ``--pgid-file``) mean the user meant to run something
    and forgot the budget: that is an error (exit 2), not the help with exit 0, which a
    background chain would take for a finished run. Without them, the help."""
    given = [f"--{name.replace('_', '-')}" for name in RUN_OPTIONS if getattr(args, name, None)]
    if given:
        parser.error(f"{', '.join(given)} runs nothing without a budget: add --budget-min MINUTES or --until HH:MM")
    parser.print_help()


def run_budget(
    scale: Scale,
    plan: Sequence[Tuple[Point, int]],
    script: Path,
    args: argparse.Namespace,
    until: Optional[float],
) -> None:
    """The plan's next runs within ``--budget-min`` / ``--until``, with this process group's id
    in ``--pgid-file`` while they run (the pause scripts stop and continue that group)."""
    if args.pgid_file is not None:
        args.pgid_file.write_text(str(os.getpgrp()))
    try:
        run_grid(scale, plan, script, args.budget_min, args.pause_log, args.only, args.start_anyway, until)
    finally:
        if args.pgid_file is not None:
            args.pgid_file.unlink(missing_ok=True)
