"""Bring a GPU call's results archive into the repository: one row per run, with its clocks.

    python benchmarks/gpu/collect.py results-20261125-101500.tar.gz [more archives] \
        --into benchmarks/results/gpu_smoke

Each archive is unpacked under ``--into`` (``calls/<archive>/runner.json``: the call's device,
commit, clocks and each attempt's command and exit code; ``runs/``; ``logs/``), then ``runs.csv``
and ``summary.md`` are rebuilt from every call there, one row per run (its newest attempt): the
outcome, its last epoch's seconds per step (so epoch 1's start-up stays out once there are two),
images and views per second, ``data_wait_fraction``, peak memory, the last online kNN, a
failure's last error line. solo-learn's own scripts keep no clocks: their rows give the outcome
and the epochs of Lightning's CSV log. Standard library only, as the runner.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import tarfile
from pathlib import Path
from typing import Dict, List, Optional

COLUMNS = (
    "run status exit_code device commit finished_utc epochs batch views step_s images_per_s views_per_s "
    "data_wait_fraction peak_memory_mib knn_acc1 seconds error command"
).split()
ERROR = re.compile(r"(Error|error:|Exception|FAILED|Traceback|mvssl: .*(stop|refus))")


def unpack(archive: Path, into: Path) -> Path:
    """The archive's files under ``into`` (runs/, logs/ merged; runner.json and state.json per call)."""
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        if not any(m.name.endswith("/runner.json") for m in members):
            raise SystemExit(f"{archive}: no runner.json inside: not an archive of benchmarks/gpu/runner.py")
        call = into / "calls" / archive.name.split(".tar")[0]
        for member in members:
            parts = Path(member.name).parts[1:]  # below results-<time>/
            if not parts or ".." in parts:
                continue
            target = (into if parts[0] in ("runs", "logs") else call).joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(member).read())
    return call


def read_rows(path: Path) -> List[Dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def number(value: Optional[str]) -> Optional[float]:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def short_commit(commit: str) -> str:
    """12 hex digits, keeping the ``+dirty`` mark."""
    return commit[:12] + ("+dirty" if commit.endswith("+dirty") else "")


def step_seconds(rows: List[Dict[str, str]]) -> Optional[float]:
    """The last epoch's training seconds per optimizer step (the whole run's with one epoch)."""
    if not rows:
        return None
    last, before = rows[-1], rows[-2] if len(rows) > 1 else {}
    seconds, steps = ((number(last.get(k)) or 0.0) - (number(before.get(k)) or 0.0) for k in ("train_seconds", "step"))
    return seconds / steps if steps > 0 and seconds > 0 else None


def batch_and_views(args: dict) -> tuple:
    """(batch per process, views per image) from a run's args.json ("" where it does not say)."""
    data = args.get("data", {})
    # solo-learn's two counts first: they are m in every run's args.json (data.num_views was the
    # large views only before it meant m)
    views = (data.get("num_large_crops") or 0) + (data.get("num_small_crops") or 0) or data.get("num_views")
    return args.get("optimizer", {}).get("batch_size") or "", views or ""


def last_error(log: Path) -> str:
    if not log.is_file():
        return ""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if ERROR.search(line)]
    return lines[-1][:300] if lines else ""


def run_row(into: Path, attempt: dict, call: dict) -> Dict[str, object]:
    """One run's row from its newest attempt and whatever its folder holds."""
    name, status = attempt["name"], attempt["status"]
    row: Dict[str, object] = dict.fromkeys(COLUMNS, "")
    row.update(run=name, status={"done": "pass", "failed": "fail"}.get(status, status), exit_code=attempt["exit_code"])
    row.update(device=call.get("device", ""), commit=call.get("repo_commit", ""), finished_utc=call.get("end", ""))
    row.update(seconds=attempt["seconds"], command=attempt["command"])
    folder = into / "runs" / name
    newest = lambda pattern: sorted(folder.rglob(pattern), key=lambda p: p.stat().st_mtime)  # noqa: E731
    args = newest("args.json")
    if args:
        row["batch"], row["views"] = batch_and_views(json.loads(args[-1].read_text()))
    ours = [m for m in newest("metrics.csv") if (m.parent / "args.json").is_file()]  # the plugin's RunLog
    if ours:
        rows = read_rows(ours[-1])
        batch, views, step = row["batch"], row["views"], step_seconds(rows)
        peaks = [number(r.get("peak_memory_mib")) for r in rows]
        knn = [number(r.get("val_knn_acc1")) for r in rows if number(r.get("val_knn_acc1")) is not None]
        row.update(
            epochs=len(rows),
            step_s=f"{step:.4f}" if step else "",
            images_per_s=f"{batch / step:.0f}" if step and batch else "",
            views_per_s=f"{batch * views / step:.0f}" if step and batch and views else "",
            data_wait_fraction=rows[-1].get("data_wait_fraction", "") if rows else "",
            peak_memory_mib=max((p for p in peaks if p is not None), default=""),
            knn_acc1=f"{knn[-1]:.2f}" if knn else "",
        )
    elif newest("metrics.csv"):  # solo-learn's own script: Lightning's CSV log, epochs only
        row["epochs"] = len({r["epoch"] for r in read_rows(newest("metrics.csv")[-1]) if r.get("epoch")})
    if row["status"] != "pass":
        row["error"] = last_error(into / "logs" / name / f"attempt-{attempt['attempt']}.log")
    return row


def rebuild(into: Path) -> List[Dict[str, object]]:
    """runs.csv and summary.md from every call under ``into``; each run's newest attempt wins."""
    newest: Dict[str, tuple] = {}
    calls = []
    for path in sorted((into / "calls").glob("*/runner.json")):
        call = json.loads(path.read_text())
        calls.append(call)
        for attempt in call.get("runs", []):
            newest[attempt["name"]] = (attempt, call)  # calls sort by time: later ones replace
    rows = [run_row(into, attempt, call) for attempt, call in newest.values()]
    with open(into / "runs.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    shown = ("run", "status", "epochs", "views", "step_s", "images_per_s", "data_wait_fraction", "peak_memory_mib")
    lines = [
        f"# {into.name}: one row per run (its newest attempt), from `benchmarks/gpu/collect.py`",
        "",
        "| call | device | commit | start (UTC) | end (UTC) | runs |",
        "|---|---|---|---|---|---|",
    ]
    for call in calls:
        commit = short_commit(str(call.get("repo_commit", "?")))
        lines.append(
            f"| {call.get('argv', [])} | {call.get('device', '?')} | {commit} | "
            f"{call.get('start', '?')} | {call.get('end', '?')} | {len(call.get('runs', []))} |"
        )
    lines += ["", "| " + " | ".join(shown) + " | error |", "|" + "---|" * (len(shown) + 1)]
    for row in rows:
        lines.append("| " + " | ".join(str(row[c]) for c in shown) + f" | {str(row['error']).replace('|', '/')} |")
    lines += ["", "Commands, exit codes and clocks of every attempt: `calls/*/runner.json`; logs: `logs/`."]
    (into / "summary.md").write_text("\n".join(lines) + "\n")
    return rows


def rebuild_from(archives: List[Path], into: Path) -> List[Dict[str, object]]:
    """Unpacks ``archives`` under ``into`` and rebuilds its runs.csv and summary.md."""
    missing = [str(a) for a in archives if not a.is_file()]
    if missing:
        raise SystemExit(f"no such archive: {', '.join(missing)}")
    into.mkdir(parents=True, exist_ok=True)
    for archive in archives:
        print(f"collect: {archive} -> {unpack(archive, into)}")
    return rebuild(into)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("archives", nargs="*", type=Path, help="results-<time>.tar.gz files from runner.py")
    parser.add_argument("--into", type=Path, required=True, help="e.g. benchmarks/results/gpu_smoke")
    args = parser.parse_args(argv)
    rows = rebuild_from(args.archives, args.into)
    print(f"collect: {len(rows)} runs in {args.into / 'runs.csv'} and summary.md")
    for row in rows:
        print(f"  {row['run']}: {row['status']}, {row['step_s'] or '-'} s / step, {row['images_per_s'] or '-'} img / s")


if __name__ == "__main__":
    main()
