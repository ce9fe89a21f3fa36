"""solo-learn's methods and ours, tuned alike: the same screens for every method, picked on the
validation split, never on the test set.

    python benchmarks/leaderboard.py plan [--round A|B|C] # one "tag|main_pretrain.py arguments" line a screen
    python benchmarks/leaderboard.py records [--minutes 60 [--tail 20]] # each pick's record runs, as plan's
    python benchmarks/leaderboard.py split --method mmcr [--minutes 60 --tail 20]  # a lever at a record's length
    python benchmarks/leaderboard.py split --method mmcr --warmup 3 --peak 1.6e-2  # a warm-up to a higher lr
    python benchmarks/leaderboard.py split --method mmcr --ramp 16 --ramp-end 0.2  # the resolution ramp
    python benchmarks/leaderboard.py split --method mmcr --minutes 30 --tail 0 --compile  # torch.compile
    python benchmarks/leaderboard.py split --method mmcr --minutes 30 --tail 0 --first-stage-width 32
    python benchmarks/leaderboard.py split --method mmcr --ramp 16 --strength 0.5  # + the augmentation's ramp
    python benchmarks/leaderboard.py split --method mmcr --cycle 20  # the tail in every 20-minute cycle
    python benchmarks/leaderboard.py split --method mmcr --hard-views 2 4 16  # the 2 hardest of 4 views
    python benchmarks/leaderboard.py precision            # each pick's loss in bf16, then float32 (3 epochs)
    python benchmarks/leaderboard.py collect ROOT         # copies the finished screens and records below ROOT here
    python benchmarks/leaderboard.py report               # the screens' table (each method's pick), the records'

Each method starts from its CPU recipe (solo-learn's CIFAR recipe as it ships, on the speedrun's
backbone, data path and precision; ours, ``speedrun_{mabt,mavicreg,mmcr}_cpu.yaml``) and gets the same
six screens:
its LARS + warm-up-cosine at 0.5x, 1x and 2x the lr solo-learn ships (ours: Barlow Twins' 0.3),
and Adam at a constant 1e-3, 2e-3 and 4e-3 (ours' family). Every screen trains 3 epochs (the
speedrun levers' screen) with ``data.holdout=5000`` held out of training and no test set
(``data.val_path=null``), and is read by ``knn_holdout_acc1`` after its last epoch. Round A is each
method's shipped setting and Adam at 2e-3; round B the other four; round C, once a method's six
have run, Adam at half or twice its best Adam lr where that lr is the lowest or highest it
screened (``edge_screens``: the same rule for every method). The lrs are solo-learn's
nominal ones: it multiplies them by batch / 256 (the peers' recipes use 256, ours 128).

A pick's record is the recipe that is its setting (``leaderboard_plan.RECORD_RECIPES``: its lr, its
time budget of ``RECORD_MINUTES`` training minutes, all 50,000 images, the test set read after every
epoch), run on two seeds; ``records --loss-fp32`` runs the peers' with their loss in float32, as ours
compute theirs. Records are kept and compared per CPU kind (the minutes of one kind say nothing
of another's). On each, the records' table sets each of our records against the best of
solo-learn's methods recorded there (with its loss in float32, as ours, where one was): that
method's test kNN at the end of its records (the mean of its seeds, after about
``RECORD_MINUTES``), and the training minutes from which our curve stays at or above it
(``eval.time_to_accuracy``'s rule). A constant-lr record
may train on past them (``records --minutes 60``, the 70%-in-60-minutes target): its row and the
comparison read it ``within`` ``RECORD_MINUTES`` as the shorter run would have stopped, and
``beyond.csv`` reads all of it. With ``--tail 20`` its lr falls to zero over the last 20 of
them (a tail kept on the split); the tail starts after ``RECORD_MINUTES``, so the first of them
still read as a constant-lr record.

What 3-epoch screens cannot see, a lever at a record's length (the lr's tail over a time budget's
last minutes, ``scheduler.tail_minutes``), is tried as ``split`` plans it: a pick's record line with
``data.holdout=5000`` held out, once at its constant lr and once with the lever, on one seed at a
time. Its holdout kNN decides (kept only where it helps on two seeds); the test set is read beside
it for the records that follow, never to choose. A warm-up to a higher peak lr (``split --warmup 3
--peak 1.6e-2``) is the run with the tail at that lr, its lr rising from zero over the first minutes,
read against the pick's run with the tail; so is the resolution ramp (``split --ramp 16 --ramp-end
0.2``): that run with views from 16 px growing to full size by 20% of ``max_epochs``.

The plans (screens, picks, record and split lines) are ``leaderboard_plan.py``'s; this module
collects the runs and writes the tables. To run a plan, one screen at a time and nothing else
beside it::

    python benchmarks/leaderboard.py plan | while IFS='|' read -r tag args; do
        python main_pretrain.py $args name=$tag checkpoint.dir=ROOT/$tag; done
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from doc_blocks import write_table
from leaderboard_plan import (
    METHODS,
    RECORD_MINUTES,
    RECORD_SEEDS,
    edge_screens,
    lever_base,
    lever_line,
    picks,
    record_lines,
    record_of,
    screen_of,
    screens,
    split_lines,
    split_of,
)
from leaderboard_precision import precision_lines, precision_of, report_precision
from leaderboard_records import OUT, report_records
from own_clock import copy_small_files, machine, machine_key, record

from mvssl_plugin.files import read_csv, read_json, write_csv
from mvssl_plugin.runs import EPOCH_KNN, METRICS, RUN_LOG

#: the tables live in ``OUT`` (screens.md, records.md, split.md); docs/speedrun.md reads them in prose.
#: A page given to ``report`` gets a table between these markers
START = "<!-- leaderboard screens: made by `python benchmarks/leaderboard.py report` from results/leaderboard -->"
END = "<!-- end of the leaderboard screens -->"
SPLIT_START = (
    "<!-- levers at a record's length: made by `python benchmarks/leaderboard.py report` from results/leaderboard -->"
)
SPLIT_END = "<!-- end of the levers at a record's length -->"


def diverged_epoch(folder: Path) -> Optional[int]:
    """The epoch in which a screen diverged, or None: its run stopped on a non-finite loss
    (``run.json``: ``failed: FloatingPointError``, exit 3), or ``metrics.csv`` logged a NaN loss."""
    launches = read_json(folder / RUN_LOG, {"launches": []})["launches"]
    if launches and launches[-1].get("status") == "failed: FloatingPointError":
        return int(launches[-1].get("epochs_completed", 0))
    for r in read_csv(folder / METRICS) if (folder / METRICS).is_file() else []:
        if any(k.startswith("train_") and k.endswith("loss") and v.lower() == "nan" for k, v in r.items()):
            return int(r["epoch"])
    return None


def collect(root: Path, out: Path = OUT) -> List[Path]:
    """Copies the small files (and ``root/<tag>.log``, the console) of each run below ``root`` that
    the plans name: into ``out/screens`` the finished screens and the diverged ones (stopped on a
    non-finite loss, before or after a kNN), into ``out/records/<this CPU's machine_key>`` the
    finished records of screened settings (a record's minutes are compared only with records of
    the same CPU kind), into ``out/split/<machine_key>`` the finished runs of ``split_lines``, into
    ``out/precision/<machine_key>`` those of ``precision_lines``."""
    named = [
        (str(read_json(f / "args.json").get("name")), f) for f in sorted(p.parent for p in root.rglob("args.json"))
    ]
    tags = [t for t, _ in named] + [p.name for p in (out / "screens").glob("*")]
    screened = {s.tag for s in [*screens(), *filter(None, map(screen_of, tags))]}
    copied, here = [], machine_key(machine())
    for tag, folder in named:
        of = record_of(tag)
        kind = "records" if of and of.tag in screened else "screens" if screen_of(tag) else None
        kind = kind or ("split" if split_of(tag) else "precision" if precision_of(tag) else None)
        launches = read_json(folder / RUN_LOG, {"launches": []})["launches"]
        finished = bool(launches) and launches[-1].get("finished") and (folder / EPOCH_KNN).is_file()
        diverged = kind == "screens" and diverged_epoch(folder) is not None
        if kind and (finished or diverged):
            target = out / kind / tag if kind == "screens" else out / kind / here / tag
            copied.append(copy_small_files(folder, root / f"{tag}.log", target))
    return copied


def keep_verdict(gains: Sequence[float], seeds: int = len(RECORD_SEEDS)) -> str:
    """The lever rule: kept where it helps (a gain above zero on the holdout) on each of ``seeds`` seeds;
    so one seed that does not help decides it before the others have run."""
    helps = sum(g > 0 for g in gains)
    if helps < len(gains) < seeds:
        lost = len(gains) - helps
        return f"not kept: it does not help on {lost} of {len(gains)} seeds run so far, and must help on all {seeds}"
    if len(gains) < seeds:
        return f"{len(gains)} of {seeds} seeds run: not decided"
    mean = f"mean {sum(gains) / len(gains):+.2f} points"
    if helps == len(gains):
        return f"kept: it helps on all {len(gains)} seeds ({mean})"
    return f"not kept: it helps on {helps} of {len(gains)} seeds ({mean})"


def base_run(run: Dict[str, object], rows: Sequence[Dict[str, object]]) -> Optional[Dict[str, object]]:
    """The split run a lever's run is read against: the same method and seed, one lever word fewer
    (``lever_base``), of its own setting where there is one (a warm-up to a higher peak lr: the
    method's run at its pick)."""
    base = lever_base(str(run["lever"]))
    twins = [c for c in rows if (c["method"], c["seed"], c["lever"]) == (run["method"], run["seed"], base)]
    return min(twins, key=lambda c: c["setting"] != run["setting"], default=None)


def report_split(out: Path = OUT, pages: Sequence[Path] = ()) -> str:
    """``split.csv`` and ``split.md`` in ``out`` from ``out/split/<machine_key>``: per CPU kind, each
    run of a lever at a record's length read on the holdout split (the test set's kNN beside it,
    not chosen on), then per setting and seed each lever against its constant twin at the end; the
    table between the split's markers of each page in ``pages``."""
    everything, lines = [], []
    for kind in sorted(p for p in (out / "split").glob("*") if p.is_dir()):
        rows = []
        for knn in sorted(kind.glob(f"*/{EPOCH_KNN}")):
            screen, lever, seed = split_of(knn.parent.name) or (None, "", "")
            test = record(knn.parent)["final_knn"]
            rows.append({"machine": kind.name, "setting": getattr(screen, "tag", ""), "lever": lever,
                         **record(knn.parent, acc="knn_holdout_acc1"), "seed": seed, "test_knn": test})  # fmt: skip
        if not rows:
            continue
        # by what a tag names, not its folder: a VM-scaled tag (split60x1.16-...) sorts apart from its
        # twins; seeds as numbers (10 after 2)
        rows.sort(key=lambda r: (str(r["setting"]), str(r["lever"]), int(r["seed"] or 0)))
        head = ["setting", "lever", "seed", "epochs", "training min", "holdout kNN at the end", "holdout: min to 60%",
                "65%", "70%", "test kNN at the end (not chosen on)"]  # fmt: skip
        cpu = " / ".join(sorted({str(r["cpu"]) for r in rows}))
        lines += [f"On {cpu}:", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in rows:
            knn = [f"{float(r['final_knn']):.2f}", *[r[f"min_to_{t}"] or "-" for t in (60, 65, 70)]]
            cells = [r["setting"], r["lever"], r["seed"], r["epochs"], r["train_minutes"], *knn,
                     f"{float(r['test_knn']):.2f}"]  # fmt: skip
            lines.append("| " + " | ".join(map(str, cells)) + " |")
        lines.append("")
        gains: Dict[Tuple[str, str], List[float]] = {}
        for r in rows:
            twin = base_run(r, rows)
            if r["lever"] == "const":
                continue
            if twin is None:
                lines.append(f"- {r['setting']}, seed {r['seed']}: {r['lever']} has no {lever_base(str(r['lever']))} "
                             "run of its seed to be read against yet")  # fmt: skip
                continue
            gain = float(r["final_knn"]) - float(twin["final_knn"])
            gains.setdefault((str(r["setting"]), str(r["lever"])), []).append(gain)
            against = "the constant lr" if twin["lever"] == "const" else f"{twin['setting']} with {twin['lever']}"
            lines.append(f"- {r['setting']}, seed {r['seed']}: {r['lever']} against {against}, at the end on "
                         f"the holdout: {gain:+.2f} points")  # fmt: skip
        lines += [f"- {lever} on {setting}: {keep_verdict(seen)}" for (setting, lever), seen in gains.items()]
        lines.append("")
        everything += rows
    write_csv(out / "split.csv", everything)
    table = "\n".join(lines).rstrip() + "\n"
    write_table(table, out / "split.md", pages, SPLIT_START, SPLIT_END)
    return table


def row(folder: Path) -> Dict[str, object]:
    """One screen's reading: its holdout kNN after each epoch (none: it diverged before the first
    ended), its training minutes."""
    screen, args = screen_of(folder.name), read_json(folder / "args.json")
    assert screen is not None, folder
    knn = read_csv(folder / EPOCH_KNN) if (folder / EPOCH_KNN).is_file() else []
    launches = read_json(folder / RUN_LOG)["launches"]
    seconds = float(knn[-1]["train_seconds"]) if knn else float(launches[-1].get("train_seconds", 0.0))
    return {
        "tag": folder.name,
        "method": args["method"],
        "optimizer": screen.optimizer,
        "lr": screen.lr,
        "batch": args["optimizer"]["batch_size"],
        "round": screen.round,
        "holdout_knn": float(knn[-1]["knn_holdout_acc1"]) if knn else "",
        "diverged_in_epoch": "" if (epoch := diverged_epoch(folder)) is None else epoch,
        "curve": " ".join(f"{float(r['knn_holdout_acc1']):.2f}" for r in knn),
        "train_minutes": round(seconds / 60, 1),
        "cpu": read_json(folder / "machine.json")["model"],
    }


def report(out: Path = OUT, pages: Sequence[Path] = ()) -> str:
    """``screens.csv`` and ``screens.md`` in ``out`` (each method's pick in bold), and the table
    between the markers of each page in ``pages``."""
    rows = [row(f) for f in sorted((out / "screens").iterdir()) if (f / "args.json").is_file()]
    write_csv(out / "screens.csv", rows)
    chosen = {r["tag"] for r in picks(rows).values()}
    counts = {m: sum(r["method"] == m and r["round"] != "C" for r in rows) for m in {str(r["method"]) for r in rows}}
    edges = {m: sum(r["method"] == m and r["round"] == "C" for r in rows) for m in counts}
    lines = [
        "| method | optimizer | lr | batch | holdout kNN after 3 epochs | per epoch | training min | screens done |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def score(r: Dict[str, object]) -> float:
        return -1.0 if r["holdout_knn"] in ("", None) else float(r["holdout_knn"])

    for r in sorted(rows, key=lambda r: (str(r["method"]), -score(r))):
        mark = "**" if r["tag"] in chosen else ""
        knn = "-" if score(r) < 0 else f"{score(r):.2f}"
        epoch = r["diverged_in_epoch"]
        diverged = "" if epoch in ("", None) else f" (non-finite loss in epoch {epoch}: stopped)"
        beyond = edges[str(r["method"])]
        lines.append(
            f"| {r['method']} | {r['optimizer']} | {r['lr']} | {r['batch']} | {mark}{knn}{mark}{diverged} "
            f"| {r['curve']} | {r['train_minutes']} | {counts[str(r['method'])]} of 6"
            f"{f' + {beyond} beyond the edge' if beyond else ''} |"
        )
    table = "\n".join(lines) + "\n"
    write_table(table, out / "screens.md", pages, START, END)
    return table


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    plan = sub.add_parser("plan", help="the screens' main_pretrain.py arguments, one line each")
    plan.add_argument("--round", choices=("A", "B", "C"), help="C: beyond the Adam grid's edge (from screens.csv)")
    take = sub.add_parser("collect", help="copy the finished screens and records below ROOT here")
    take.add_argument("root", type=Path)
    sub.add_parser("report", help="the screens' and the records' tables from what was collected")
    lines = sub.add_parser("records", help="each method's pick as record runs, one 'tag|arguments' line each")
    lines.add_argument("--minutes", type=float, default=RECORD_MINUTES,
                       help="a constant lr's training minutes (its record still reads the first 30)")  # fmt: skip
    lines.add_argument("--tail", type=float, default=0.0,
                       help="the constant-lr picks only, their lr falling to zero over the last minutes")  # fmt: skip
    lines.add_argument("--loss-fp32", action="store_true",
                       help="the peers' records with their loss in float32, as ours compute theirs")  # fmt: skip
    both = sub.add_parser("precision", help="each pick's loss in bf16 and in float32, 3 epochs on the split")
    both.add_argument("--seed", type=int, default=1)
    split = sub.add_parser("split", help="a pick at a record's length on the split: constant lr, then with a tail")
    split.add_argument("--method", required=True, choices=[m.key for m in METHODS if m.ours])
    split.add_argument("--minutes", type=float, default=60.0, help="the training minutes of both runs")
    split.add_argument("--tail", type=float, default=20.0, help="the lr's tail: the budget's last minutes")
    split.add_argument("--seed", type=int, default=1)
    split.add_argument("--warmup", type=float, default=0.0,
                       help="with --peak: the lever is a warm-up over these first minutes to the lr --peak, "
                            "read against the pick with the tail (one line)")  # fmt: skip
    split.add_argument("--peak", default="", help="the warm-up's constant lr, e.g. 1.6e-2")
    split.add_argument("--ramp", type=int, help="the lever is views from these px, full size by --ramp-end")
    split.add_argument("--ramp-end", type=float, default=0.2, help="the fraction of max_epochs the ramp ends at")
    split.add_argument("--strength", type=float, help="with --ramp: the augmentation's magnitude at its start, a "
                       "fraction of the recipe's growing to 1 with the side (read against the ramp alone)")  # fmt: skip
    split.add_argument("--compile", action="store_true", help="the lever is performance.compile (with --tail 0: "
                       "read against the constant lr)")  # fmt: skip
    split.add_argument("--first-stage-width", type=int, help="the lever is the backbone's first stage this many "
                       "channels wide (with --tail 0: read against the constant lr)")  # fmt: skip
    split.add_argument("--cycle", type=float, default=0.0, help="the lever is the tail repeated in every cycle of "
                       "these minutes (they divide --minutes; read against the pick with the tail)")  # fmt: skip
    split.add_argument("--hard-views", type=int, nargs=3, metavar=("K", "M", "SIDE"),
                       help="the lever is each image trained on its K hardest of M views, chosen at SIDE px "
                            "(read against the pick with the tail)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.action == "plan":
        for s in edge_screens(read_csv(OUT / "screens.csv")) if args.round == "C" else screens(args.round):
            print(f"{s.tag}|{' '.join(s.arguments())}")
    elif args.action == "collect":
        for target in collect(args.root):
            print(f"leaderboard: {target}")
    elif args.action == "records":
        print("\n".join(record_lines(read_csv(OUT / "screens.csv"), args.minutes, args.tail, args.loss_fp32)))
    elif args.action == "precision":
        print("\n".join(precision_lines(read_csv(OUT / "screens.csv"), args.seed)))
    elif args.action == "split":
        rows = read_csv(OUT / "screens.csv")
        levers = (
            args.warmup,
            args.peak,
            args.ramp,
            args.compile,
            args.strength is not None,
            args.first_stage_width,
            args.cycle,
            args.hard_views,
        )
        if any(levers):
            ramp = (args.ramp, args.ramp_end) if args.ramp else None
            print(
                lever_line(
                    rows, args.method, args.minutes, args.tail, args.seed,
                    warmup=args.warmup, peak=args.peak, ramp=ramp, compiled=args.compile, strength=args.strength,
                    first_stage=args.first_stage_width, cycle=args.cycle,
                    hard=tuple(args.hard_views) if args.hard_views else None,
                )
            )  # fmt: skip
        else:
            print("\n".join(split_lines(rows, args.method, args.minutes, args.tail, args.seed)))
    else:
        print(report(), end="")
        print(report_records(), end="")
        if (OUT / "split").is_dir():
            print(report_split(), end="")
        if (OUT / "precision").is_dir():
            print(report_precision(OUT, read_csv(OUT / "screens.csv")), end="")


if __name__ == "__main__":
    main()
