"""What every part of one runner call shares (``runner.py``'s docstring says what a call does):
where the checkout is, the call's clock against its budget and the lines it prints, UTC stamps,
and the state files written whole. Standard library only, Python 3.9+, like the runner."""

from __future__ import annotations

import datetime
import json
import os
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MIB = 1 << 20


class Clock:
    """Seconds since the runner started, against ``--budget-s``."""

    def __init__(self, budget_s: float) -> None:
        self.restart(budget_s)

    def restart(self, budget_s: float) -> None:
        """Counts from now against ``budget_s`` (``main``: the call's budget starts with it)."""
        self.start = time.monotonic()
        self.budget_s = budget_s
        self.wall_start = time.time()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.budget_s - self.elapsed()


#: the call's clock, which ``say`` prefixes every line with; ``main`` restarts it at the budget
CLOCK = Clock(0.0)


def say(message: str) -> None:
    print(f"[runner {CLOCK.elapsed():6.1f}s] {message}", flush=True)


def utc(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def load_json(path: Path, default: dict) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def save_json(path: Path, data: dict) -> None:
    """Write-then-rename: a kill in the middle leaves the old file, never half of one."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)
