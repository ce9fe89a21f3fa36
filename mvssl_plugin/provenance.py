"""Which plugin made a run or an export: the package's version and, run from a git checkout,
its commit. Standard library only."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Optional

import mvssl_plugin


def version() -> str:
    return mvssl_plugin.__version__


@functools.lru_cache(maxsize=1)
def commit() -> Optional[str]:
    """The commit of the checkout the plugin runs from (an editable install); None for an
    installed wheel or where git is missing."""
    here = Path(__file__).resolve().parents[1]
    if not (here / ".git").exists():
        return None
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
