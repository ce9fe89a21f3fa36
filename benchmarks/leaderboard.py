"""solo-learn's methods and ours, tuned alike: the same screens for every method, picked on the
validation split, never on the test set.

    python benchmarks/leaderboard.py plan [--round A|B]   # one "tag|main_pretrain.py arguments" line a screen
    python benchmarks/leaderboard.py collect ROOT         # copies the finished screens below ROOT here
    python benchmarks/leaderboard.py report               # screens.csv, screens.md: each method's pick
    python benchmarks/leaderboard.py records              # each pick's record runs, as plan's lines

Each method starts from its CPU recipe (solo-learn's CIFAR recipe as it ships, on the speedrun's
backbone, data path and precision; ours, ``speedrun_cpu.yaml``) and gets the same six screens:
its LARS + warm-up-cosine at 0.5x, 1x and 2x the lr solo-learn ships (ours: Barlow Twins' 0.3),
and Adam at a constant 1e-3, 2e-3 and 4e-3 (ours' family). Every screen trains 3 epochs (the
speedrun levers' screen) with ``data.holdout=5000`` held out of training and no test set
(``data.val_path=null``), and is read by ``knn_holdout_acc1`` after its last epoch. Round A is each
method's shipped setting and Adam at 2e-3; round B the other four. The lrs are solo-learn's
nominal ones: it multiplies them by batch / 256 (the peers' recipes use 256, ours 128).

To run a plan, one screen at a time and nothing else beside it::

    python benchmarks/leaderboard.py plan | while IFS='|' read -r tag args; do
        python main_pretrain.py $args name=$tag checkpoint.dir=ROOT/$tag; done
"""

from __future__ import annotations

import argparse
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from doc_blocks import write_table
from own_clock import machine

from mvssl_plugin.files import read_csv, read_json, write_csv, write_json
from mvssl_plugin.runs import EPOCH_KNN, METRICS, RUN_LOG

OUT = Path(__file__).resolve().parent / "results" / "leaderboard"
#: the page whose screens table ``report`` writes, between these markers
PAGE = Path(__file__).resolve().parents[1] / "docs" / "speedrun.md"
START = "<!-- leaderboard screens: made by `python benchmarks/leaderboard.py report` from results/leaderboard -->"
END = "<!-- end of the leaderboard screens -->"
SCREEN_EPOCHS = 3
#: every screen: its budget, the split it is read on, and no test set
SCREEN = (f"max_epochs={SCREEN_EPOCHS}", "seed=1", "data.holdout=5000", "data.val_path=null", "epoch_knn.enabled=true")
ADAM = ("optimizer.name=adam", "~optimizer.kwargs", "optimizer.weight_decay=1e-6", "scheduler.name=none")
#: solo-learn's LARS settings for its CIFAR recipes, for a recipe that ships Adam
LARS = (
    "optimizer.name=lars",
    "optimizer.weight_decay=1e-4",
    "+optimizer.kwargs.clip_lr=True",
    "+optimizer.kwargs.eta=0.02",
    "+optimizer.kwargs.exclude_bias_n_norm=True",
    "scheduler.name=warmup_cosine",
    "++scheduler.warmup_epochs=0.2",
)
#: every record in one offline wandb project, side by side (each run's own tags name its method and optimizer)
WANDB = ("wandb.enabled=true", "wandb.offline=true", "wandb.project=mvssl-leaderboard", "+wandb.tags=[leaderboard]")
#: a record's training minutes (the issue's comparison: each method's accuracy at 30 minutes) and seeds
RECORD_MINUTES, RECORD_SEEDS = 30.0, (1, 2)
ADAM_LRS = ("2e-3", "1e-3", "4e-3")
LARS_FACTORS = (1.0, 0.5, 2.0)


@dataclass(frozen=True)
class Method:
    key: str
    recipe: str
    lars_lr: float  # the LARS lr solo-learn ships for it (ours: Barlow Twins')
    ships: str  # the optimizer its recipe ships: "lars" or "adam"


METHODS = (
    Method("barlow", "solo_barlow_cifar_cpu.yaml", 0.3, "lars"),
    Method("vicreg", "solo_vicreg_cifar_cpu.yaml", 0.3, "lars"),
    Method("simclr", "solo_simclr_cifar_cpu.yaml", 0.4, "lars"),
    Method("byol", "solo_byol_cifar_cpu.yaml", 1.0, "lars"),
    Method("mabt", "speedrun_cpu.yaml", 0.3, "adam"),
)


@dataclass(frozen=True)
class Screen:
    method: Method
    optimizer: str  # "lars" or "adam"
    lr: str

    @property
    def tag(self) -> str:
        return f"{self.method.key}-{self.optimizer}-{self.lr}"

    @property
    def round(self) -> str:
        shipped = f"{self.method.lars_lr:g}" if self.optimizer == "lars" else ADAM_LRS[0]
        return "A" if self.lr == shipped else "B"

    def arguments(self) -> List[str]:
        family: Tuple[str, ...] = ()
        if self.optimizer != self.method.ships:
            family = ADAM if self.optimizer == "adam" else LARS
        return ["--config-name", self.method.recipe, *SCREEN, *family, f"optimizer.lr={self.lr}"]


def screens(round_: Optional[str] = None) -> List[Screen]:
    """Every method's six screens, round A's first."""
    every = [
        Screen(m, opt, lr)
        for m in METHODS
        for opt, lrs in (("lars", [f"{m.lars_lr * f:g}" for f in LARS_FACTORS]), ("adam", ADAM_LRS))
        for lr in lrs
    ]
    every.sort(key=lambda s: s.round)
    return [s for s in every if round_ in (None, s.round)]


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


def collect(root: Path, out: Path = OUT / "screens") -> List[Path]:
    """Copies each screen's small files below ``root`` (and ``root/<tag>.log``, its console): the
    finished ones, and the diverged ones (stopped on a NaN loss, before or after a kNN)."""
    copied = []
    tags = {s.tag for s in screens()}
    for folder in sorted(p.parent for p in root.rglob("args.json")):
        args, launches = read_json(folder / "args.json"), read_json(folder / RUN_LOG, {"launches": []})["launches"]
        finished = bool(launches) and launches[-1].get("finished") and (folder / EPOCH_KNN).is_file()
        if args.get("name") not in tags or not (finished or diverged_epoch(folder) is not None):
            continue
        target = out / str(args["name"])
        target.mkdir(parents=True, exist_ok=True)
        for name in (EPOCH_KNN, METRICS, RUN_LOG, "args.json"):
            if (folder / name).is_file():
                shutil.copy2(folder / name, target / name)
        log = root / f"{args['name']}.log"
        if log.is_file():
            shutil.copy2(log, target / "console.log")
        write_json(target / "machine.json", machine())
        copied.append(target)
    return copied


def row(folder: Path) -> Dict[str, object]:
    """One screen's reading: its holdout kNN after each epoch (none: it diverged before the first
    ended), its training minutes."""
    by_tag = {s.tag: s for s in screens()}
    screen, args = by_tag[folder.name], read_json(folder / "args.json")
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


def picks(rows: Sequence[Dict[str, object]]) -> Dict[str, Dict[str, object]]:
    """Each method's best screen by its holdout kNN (a tie: the first screened)."""
    best: Dict[str, Dict[str, object]] = {}
    for r in rows:
        if r["holdout_knn"] in ("", None):  # diverged before its first kNN
            continue
        if r["method"] not in best or float(r["holdout_knn"]) > float(best[str(r["method"])]["holdout_knn"]):
            best[str(r["method"])] = r
    return best


def record_lines(rows: Sequence[Dict[str, object]]) -> List[str]:
    """``tag|arguments`` of each method's record runs: its pick on all 50,000 training images (the
    speedrun records' data), the test set read after every epoch, seeds 1 and 2, for as many epochs
    as its screen's pace fits in ``RECORD_MINUTES`` of training, logged to one offline wandb project."""
    by_tag = {s.tag: s for s in screens()}
    lines = []
    for pick in picks(rows).values():
        screen = by_tag[str(pick["tag"])]
        per_epoch = float(pick["train_minutes"]) / SCREEN_EPOCHS
        epochs = max(1, int(RECORD_MINUTES // per_epoch))
        kept = [a for a in screen.arguments() if a not in SCREEN]
        for seed in RECORD_SEEDS:
            args = [*kept, f"max_epochs={epochs}", f"seed={seed}", "epoch_knn.enabled=true", *WANDB]
            lines.append(f"record-{screen.tag}-s{seed}|{' '.join(args)}")
    return lines


def report(out: Path = OUT, pages: Sequence[Path] = (PAGE,)) -> str:
    """``screens.csv`` and ``screens.md`` in ``out`` (each method's pick in bold), and the table
    between the markers of each page in ``pages``."""
    rows = [row(f) for f in sorted((out / "screens").iterdir()) if (f / "args.json").is_file()]
    write_csv(out / "screens.csv", rows)
    chosen = {r["tag"] for r in picks(rows).values()}
    counts = {m: sum(r["method"] == m for r in rows) for m in {str(r["method"]) for r in rows}}
    lines = [
        "| method | optimizer | lr | batch | holdout kNN after 3 epochs | per epoch | training min | screens done |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def score(r: Dict[str, object]) -> float:
        return -1.0 if r["holdout_knn"] in ("", None) else float(r["holdout_knn"])

    for r in sorted(rows, key=lambda r: (str(r["method"]), -score(r))):
        mark = "**" if r["tag"] in chosen else ""
        knn = "-" if score(r) < 0 else f"{score(r):.2f}"
        nan = "" if r["diverged_in_epoch"] in ("", None) else f" (NaN loss in epoch {r['diverged_in_epoch']}: stopped)"
        lines.append(
            f"| {r['method']} | {r['optimizer']} | {r['lr']} | {r['batch']} | {mark}{knn}{mark}{nan} "
            f"| {r['curve']} | {r['train_minutes']} | {counts[str(r['method'])]} of 6 |"
        )
    table = "\n".join(lines) + "\n"
    write_table(table, out / "screens.md", pages, START, END)
    return table


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    plan = sub.add_parser("plan", help="the screens' main_pretrain.py arguments, one line each")
    plan.add_argument("--round", choices=("A", "B"))
    take = sub.add_parser("collect", help="copy the finished screens below ROOT here")
    take.add_argument("root", type=Path)
    sub.add_parser("report", help="screens.csv and screens.md from what was collected")
    sub.add_parser("records", help="each method's pick as record runs, one 'tag|arguments' line each")
    args = parser.parse_args(argv)
    if args.action == "plan":
        for s in screens(args.round):
            print(f"{s.tag}|{' '.join(s.arguments())}")
    elif args.action == "collect":
        for target in collect(args.root):
            print(f"leaderboard: {target}")
    elif args.action == "records":
        print("\n".join(record_lines(read_csv(OUT / "screens.csv"))))
    else:
        print(report(), end="")


if __name__ == "__main__":
    main()
