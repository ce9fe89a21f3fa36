"""The call's results: one ``results-<time>.tar.gz`` in ``$OUT`` under the device's 16 MiB,
with runner.json, the state, the runs' small files (no weights) and the logs, newest first, a
long log cut to its head and tail. ``collect.py`` reads it here. Standard library only, Python
3.9+, like the runner."""

from __future__ import annotations

import io
import json
import tarfile
import time
from pathlib import Path

from runner_call import CLOCK, MIB, say, utc

ARCHIVE_LIMIT = 15 * MIB  # uncompressed; the device brings back files of at most 16 MiB
LOG_KEEP = (256 * 1024, 1536 * 1024)  # head and tail bytes kept of a long log in the archive
SMALL_FILE = 4 * MIB
SKIP_SUFFIXES = (".ckpt", ".ckpt.part", ".pt", ".pth", ".npy", ".npz", ".whl")
SKIP_DIRS = {"wandb", "__pycache__", "multirun"}


def small_files(root: Path) -> list:
    """A run folder's results (args.json, metrics.csv, run.json, knn.csv, ...): no weights, no wandb copies."""
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or SKIP_DIRS & set(path.relative_to(root).parts):
            continue
        if path.name.endswith(SKIP_SUFFIXES) or path.stat().st_size > SMALL_FILE:
            continue
        found.append(path)
    return found


def log_bytes(path: Path) -> bytes:
    """A log as it goes into the archive: its head and tail when it is long."""
    size = path.stat().st_size
    head, tail = LOG_KEEP
    with open(path, "rb") as f:
        if size <= head + tail:
            return f.read()
        start = f.read(head)
        f.seek(size - tail)
        return start + f"\n[... {size - head - tail} bytes cut by the runner ...]\n".encode() + f.read()


def write_archive(out: Path, prefix: Path, report: dict) -> Path:
    """One ``results-<time>.tar.gz`` under 16 MiB: runner.json, state, results files, then logs newest first."""
    out.mkdir(parents=True, exist_ok=True)
    now = time.time()  # to the millisecond, so that names sort as calls were made
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + f"-{int(now * 1000) % 1000:03d}"
    if (out / f"results-{stamp}.tar.gz").exists():  # never replace an earlier call's archive
        stamp += "-" + str(next(n for n in range(2, 10**6) if not (out / f"results-{stamp}-{n}.tar.gz").exists()))
    entries: list = []  # (name in archive, bytes or path)
    state = prefix / "state.json"
    if state.is_file():
        entries.append(("state.json", state))
    runs_root = prefix / "trained_models"
    if runs_root.is_dir():
        entries += [(f"runs/{p.relative_to(runs_root).as_posix()}", p) for p in small_files(runs_root)]
    logs = (
        sorted((prefix / "logs").rglob("*.log"), key=lambda p: p.stat().st_mtime, reverse=True)
        if (prefix / "logs").is_dir()
        else []
    )
    entries += [(f"logs/{p.relative_to(prefix / 'logs').as_posix()}", p) for p in logs]
    chosen, total, left_out = [], 0, []
    for name, source in entries:
        data = log_bytes(source) if name.startswith("logs/") else source.read_bytes()
        if total + len(data) > ARCHIVE_LIMIT:
            left_out.append(name)
            continue
        chosen.append((name, data))
        total += len(data)
    report["archive"] = {"files": len(chosen) + 1, "bytes_uncompressed": total, "left_out": left_out}
    report["end"] = utc(time.time())
    report["seconds"] = round(CLOCK.elapsed(), 1)
    chosen.insert(0, ("runner.json", json.dumps(report, indent=1).encode()))
    path = out / f"results-{stamp}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in chosen:
            info = tarfile.TarInfo(f"results-{stamp}/{name}")
            info.size, info.mtime = len(data), int(time.time())
            tar.addfile(info, io.BytesIO(data))
    say(
        f"results: {path} ({path.stat().st_size / MIB:.2f} MiB, {len(chosen)} files"
        + (f", {len(left_out)} left out" if left_out else "")
        + ")"
    )
    return path
