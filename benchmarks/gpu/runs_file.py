"""The runs file: one ``name: command`` per line, its ``all:`` overrides, the runs a call picks
(``--skip``, ``--only``), and a run's command filled in: its placeholders, its ``{run:NAME}``
folders, the script it names (``runner.py``'s docstring gives the format). Standard library
only, Python 3.9+, like the runner."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Optional

from runner_call import REPO, say


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
    if skip:
        say(f"skipped by --skip: {', '.join(skip)}")
    if only:
        say(f"only these, by --only: {', '.join(only)}")
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


def run_folder(trained: Path, name: str) -> Optional[Path]:
    """The newest run folder (args.json beside a checkpoint) that the line ``name`` wrote under ``trained``."""
    folders = [p.parent for p in (trained / name).rglob("args.json") if any(p.parent.glob("*.ckpt"))]
    return max(folders, key=lambda p: p.stat().st_mtime) if folders else None


def fill_runs(tokens: list, trained: Path) -> tuple:
    """``{run:NAME}`` placeholders filled with :func:`run_folder`; (tokens, the names not trained yet)."""
    waiting = []

    def folder(match: re.Match) -> str:
        found = run_folder(trained, match.group(1))
        if found is None:
            waiting.append(match.group(1))
            return match.group(0)
        return str(found)

    return [RUN_PLACEHOLDER.sub(folder, t) for t in tokens], waiting
