"""The runs file (``runs/*.txt``): one ``name: command`` per line and ``#`` comments. A command
starting with ``<script>.py`` runs as ``python <repo>/<script>.py``. A line ``all: key=value ...``
adds Hydra overrides to every run after it (a run's own value wins); an empty ``all:`` drops them
(scripts with flags of their own). Placeholders: ``{data}`` (the kit's ImageFolder), ``{out}``
(the run's own folder, for ``checkpoint.dir``), ``{prefix}``, ``{repo}``, and ``{run:NAME}`` (the
run folder, with args.json and a checkpoint, that line NAME trained: the line waits for it).
Standard library only, Python 3.9+, like the runner."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[2]


def parse_runs(text: str) -> list:
    """``name: command`` lines -> [(name, tokens)], with the ``all:`` overrides merged into each later run."""
    runs, common = [], []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, command = line.partition(":")
        if not sep or not re.fullmatch(r"[A-Za-z0-9_.-]+", name.strip()):
            raise SystemExit(f"runs line {number}: expected 'name: command', got {raw!r}")
        name = name.strip()
        if name == "all":
            common = merge(common, shlex.split(command)) if command.strip() else []
        else:
            runs.append((name, merge(shlex.split(command), common, keep_existing=True)))
    names = [n for n, _ in runs]
    if len(set(names)) != len(names):
        raise SystemExit(f"runs: a name is used twice: {names}")
    return runs


def select_runs(runs: list, skip: list, only: Optional[list] = None) -> list:
    """``runs`` without the ``skip`` ones, or only the ``only`` ones (in the file's order): a lease
    too short for a list, a target without DALI, the lines an earlier lease left. Unknown names
    fail: a typo must not run the whole list."""
    names = {name for name, _ in runs}
    unknown = sorted((set(skip) | set(only or [])) - names)
    if unknown:
        raise SystemExit(f"--skip/--only: no run named {unknown} in the runs file (it has {sorted(names)})")
    return [(name, tokens) for name, tokens in runs if name not in skip and (not only or name in only)]


def override_key(token: str) -> Optional[str]:
    """``+backbone.kwargs.width=4`` -> ``backbone.kwargs.width``; None for flags and positional words."""
    if token.startswith("-") or "=" not in token:
        return None
    return token.split("=", 1)[0].lstrip("+~")


def merge(tokens: list, extra: list, keep_existing: bool = False) -> list:
    """Hydra overrides ``extra`` merged into ``tokens`` key by key (replaced, or kept with ``keep_existing``)."""
    out = list(tokens)
    for token in extra:
        key = override_key(token)
        at = [i for i, t in enumerate(out) if key is not None and override_key(t) == key]
        if not at:
            out.append(token)
        elif not keep_existing:
            out[at[0]] = token
    return out


def argv_of(tokens: list) -> list:
    if tokens and tokens[0].endswith(".py"):
        return [sys.executable, str(REPO / tokens[0])] + tokens[1:]
    if tokens and tokens[0] in ("python", "python3"):
        return [sys.executable] + tokens[1:]
    return tokens


def fill(tokens: list, **values: str) -> list:
    return [re.sub(r"\{(data|out|prefix|repo)\}", lambda m: values[m.group(1)], t) for t in tokens]


RUN_PLACEHOLDER = re.compile(r"\{run:([A-Za-z0-9_.-]+)\}")


def fill_runs(tokens: list, trained: Path) -> tuple:
    """``{run:NAME}`` filled with the newest folder under ``trained/NAME`` holding args.json beside a
    checkpoint; (tokens, the names not trained yet)."""
    waiting = []

    def folder(match: re.Match) -> str:
        found = [p.parent for p in (trained / match.group(1)).rglob("args.json") if any(p.parent.glob("*.ckpt"))]
        if not found:
            waiting.append(match.group(1))
            return match.group(0)
        return str(max(found, key=lambda p: p.stat().st_mtime))

    return [RUN_PLACEHOLDER.sub(folder, t) for t in tokens], waiting
