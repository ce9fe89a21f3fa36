"""The speedrun's levers re-read on the validation split: each lever's two settings screened as
``levers.csv``'s were (``speedrun_settings``: the same recipe, overrides and 3-epoch budget), but
with ``data.holdout=5000`` held out of training, no test set read, and the run's own per-epoch kNN
on the held-out images (``epoch_knn``); the gain at equal seconds is then worked out exactly as
``levers.csv``'s (``speedrun_rows.lever_rows``, the bf16 EPYC's step times), so the two tables
differ only in the images the kNN is read on and in the 5,000 training images held out.

    python benchmarks/lever_split.py plan [--seed 1]   # one "tag|main_pretrain.py arguments" line a screen
    python benchmarks/lever_split.py collect ROOT      # the finished screens below ROOT, here
    python benchmarks/lever_split.py report            # levers_split.csv / .md: both gains, side by side

The peer has no screen here: solo-learn's methods are screened on the split by ``leaderboard.py``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from claims.grid import SCALES, override_key, overrides
from doc_blocks import write_table
from own_clock import copy_small_files
from speedrun_clock import step_times_on
from speedrun_report import TARGET_MACHINE
from speedrun_rows import lever_rows
from speedrun_settings import CLAIMS_STEP_TIMES, LEVERS, OUT, SCREEN, SETTINGS, STEPS, setting_of

from mvssl_plugin.files import read_csv, read_json, write_csv
from mvssl_plugin.runs import EPOCH_KNN, RUN_LOG

HERE = OUT / "split"
HOLDOUT = 5000
#: the recipes' own data path, relative to where main_pretrain.py runs (the plan names no machine's folders)
DATA = Path("../shared/data/cifar10")
PAGE = Path(__file__).resolve().parents[1] / "docs" / "speedrun.md"
START = "<!-- levers on the split: made by `python benchmarks/lever_split.py report` from results/speedrun/split -->"
END = "<!-- end of the levers on the split -->"
#: the claims harness's own per-run settings, which a plain ``main_pretrain.py`` screen does not take
_HARNESS = {"checkpoint.dir", "auto_resume.enabled", "auto_resume.max_hours", "epoch_knn.enabled"}
TAGS = tuple(t for t in SCREEN if t != "peer")


def tag_of(setting: str, seed: int) -> str:
    return f"split-{SETTINGS[setting].screen().name(seed)}"


def plan(seed: int = 1) -> List[str]:
    """``tag|arguments`` per lever setting: its screen's recipe and overrides, on the split."""
    lines = []
    for setting in TAGS:
        recipe, extra = overrides(SCALES["cpu"], SETTINGS[setting].screen(), seed, root=DATA)
        extra = [o for o in extra if override_key(o) not in _HARNESS]
        args = ["--config-name", recipe, *extra, f"data.holdout={HOLDOUT}", "epoch_knn.enabled=true"]
        lines.append(f"{tag_of(setting, seed)}|{' '.join(args)}")
    return lines


def collect(root: Path, out: Path = HERE) -> List[Path]:
    """Copies each finished screen of the plan below ``root`` (and ``root/<tag>.log``) into ``out``."""
    tags = {tag_of(s, seed) for s in TAGS for seed in (1, 2)}
    copied = []
    for folder in sorted(p.parent for p in root.rglob("args.json")):
        tag = read_json(folder / "args.json").get("name")
        launches = read_json(folder / RUN_LOG, {"launches": []})["launches"]
        if tag in tags and launches and launches[-1].get("finished") and (folder / EPOCH_KNN).is_file():
            copied.append(copy_small_files(folder, root / f"{tag}.log", out / str(tag)))
    return copied


def report(out: Path = HERE, pages: Sequence[Path] = (PAGE,), test_levers: Optional[Path] = None) -> str:
    """``levers_split.csv`` and ``levers_split.md`` in ``out``: per lever, the gain at equal seconds
    on the split beside ``levers.csv``'s on the test set (same machine's step times), and whether
    its sign changed; the table between the markers of each page in ``pages``."""
    curves: List[dict] = []
    runs: Dict[str, List[str]] = {}
    for knn in sorted(out.glob(f"split-*/{EPOCH_KNN}")):
        run = knn.parent.name[len("split-") :]
        runs.setdefault(setting_of(run), []).append(run)
        curves += [  # curves.csv's shape: epochs counted from 1
            {"run": run, "epoch": int(r["epoch"]) + 1, "step": r["step"], "knn_backbone": r["knn_holdout_acc1"]}
            for r in read_csv(knn)
        ]
    steps = step_times_on(TARGET_MACHINE, read_csv(OUT / STEPS), read_csv(CLAIMS_STEP_TIMES))
    levers = [lv for lv in LEVERS if lv.changed != "peer"]
    split = lever_rows(levers, runs, curves, steps)
    # levers.csv has a row per lever and machine; the split's gains use TARGET_MACHINE's step times
    on = [r for r in read_csv(test_levers or OUT / "levers.csv") if r["timed_on"] == TARGET_MACHINE]
    test = {(r["changed"], r["reference"]): r for r in on}
    rows = []
    for r in split:
        on_test = test.get((r["changed"], r["reference"]), {})
        gain, before = float(r["gain_points_equal_seconds"]), on_test.get("gain_points_equal_seconds", "")
        changed = "" if before == "" else ("yes" if (gain > 0) != (float(before) > 0) else "no")
        rows.append({**r, "gain_on_test_set": before, "sign_changed": changed})
    write_csv(out / "levers_split.csv", rows)
    lines = [
        "| lever | changed | against | seeds | holdout kNN changed | against | gain, split | gain, test | sign flip |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        before = "-" if r["gain_on_test_set"] == "" else f"{float(r['gain_on_test_set']):+.2f}"
        lines.append(
            f"| {r['lever']}: {r['what']} | {r['changed']} | {r['reference']} | {r['seeds_changed']} / "
            f"{r['seeds_reference']} | {r['knn_changed']} | {r['knn_reference']} "
            f"| {float(r['gain_points_equal_seconds']):+.2f} | {before} | {r['sign_changed'] or '-'} |"
        )
    table = "\n".join(lines) + "\n"
    write_table(table, out / "levers_split.md", pages, START, END)
    return table


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    first = sub.add_parser("plan", help="the screens' main_pretrain.py arguments, one line each")
    first.add_argument("--seed", type=int, default=1)
    take = sub.add_parser("collect", help="copy the finished screens below ROOT here")
    take.add_argument("root", type=Path)
    sub.add_parser("report", help="levers_split.csv and levers_split.md from what was collected")
    args = parser.parse_args(argv)
    if args.action == "plan":
        print("\n".join(plan(args.seed)))
    elif args.action == "collect":
        for target in collect(args.root):
            print(f"lever_split: {target}")
    else:
        print(report(), end="")


if __name__ == "__main__":
    main()
