"""Time to accuracy on a CPU: the speedrun recipe, each efficiency lever beside it, and
solo-learn's own Barlow Twins recipe, on all of CIFAR-10.

    python benchmarks/speedrun.py --list                  # the plan and what is done
    python benchmarks/speedrun.py --budget-min 120        # run the next runs for 2 hours
    python benchmarks/speedrun.py --step-times            # every setting's step, beside the baseline's
    python benchmarks/speedrun.py --report                # records.csv, levers.csv, peer.csv, summary.md, plot

The protocol and the machinery are the claims grid's (``cpu_claims.py``): every run is a child
process training through ``main_pretrain.py``'s flow on all 50,000 training images, with the
same per-epoch callback outside the training clock (backbone kNN, k = 20, cosine, all 10,000
test images, all 50,000 training images as the bank), the same ``curves.csv`` / ``results.csv``
columns, the same budget, pauses, resume and carry; only the runs differ. A setting is the
speedrun recipe (``speedrun_cpu.yaml``) or another recipe with Hydra overrides; every
learning-rate schedule is fitted to its run's epochs (warm-up over the first 10%, cosine to
zero at the last step), so runs with a schedule never go on from a shorter one.

Levers are screened at ``SCREEN_EPOCHS`` epochs, one seed, then a second; the record and the
peer (solo-learn's ``barlow_twins`` recipe as it ships, ``solo_barlow_cifar_cpu.yaml``) run at
their full budgets, two seeds. Time is steps x the setting's step time, measured side by side
with the claims baseline's (``--step-times``; ``speedrun_clock`` says how other machines are
timed). Results: ``benchmarks/results/speedrun/``.

This file is the command line and its hooks into the claims harness (a tail run's twin keeps its
checkpoint; the tail goes on from it: ``claims.runner.go_on_from``). The rest is one module per
job beside it: ``speedrun_settings`` (the settings, levers and plan), ``speedrun_clock`` (step
times), ``speedrun_rows`` (what the curves say at a step time) and ``speedrun_report`` (the report).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from claims.cli import add_run_arguments, no_action, parse_run_arguments, run_budget
from claims.grid import SCALES, Point, Scale, scale_named
from claims.runner import epochs_done, finished, go_on_from, head_start, newest_checkpoint, run_child
from speedrun_clock import measure_step_times
from speedrun_report import LEVERS_DOC, README, report
from speedrun_rows import curve_of
from speedrun_settings import CLAIMS_IMPORTS, CLAIMS_STEP_TIMES, OUT, SETTINGS, find, plan

from mvssl_plugin.files import read_csv, write_csv

# ----------------------------------------------------------------------------- a tail run and its twin


def tail_starts(scale: Scale, point: Point) -> List[int]:
    """The epochs after which ``point``'s checkpoint starts a tail run of the plan: one for each
    tail setting whose twin it is, at its epochs."""
    tails = [(p, SETTINGS[p.tag]) for p, _ in plan(scale) if p.epochs == point.epochs]
    return sorted({p.epochs - s.tail_epochs(p.epochs) for p, s in tails if s.twin == point.tag})


def keepers(scale: Scale, point: Point, seed: int) -> List[object]:
    """The child's callback that keeps its checkpoints at :func:`tail_starts`, if any."""
    starts = tail_starts(scale, point)
    if not starts:
        return []
    from claims.keep import KeepCheckpoints  # torch: the child only

    name = point.name(seed)
    return [KeepCheckpoints(scale.run_folder(name), scale.kept_folder(name), starts)]


def twin_of(scale: Scale, name: str) -> Tuple[Point, int, str, int]:
    """The tail run ``name``'s point and seed, its constant twin's run (the same epochs and seed)
    and the tail's first epoch, up to which the two are one training."""
    point, seed = find(scale, name)
    setting = SETTINGS[point.tag]
    if setting.twin is None:
        raise SystemExit(f"{name}: --from-twin starts a tail run from its constant twin; {point.tag} has no twin")
    twin = SETTINGS[setting.twin].point(point.epochs, scale).name(seed)
    return point, seed, twin, point.epochs - setting.tail_epochs(point.epochs)


def twin_checkpoint(scale: Scale, name: str) -> Optional[Path]:
    """The newest checkpoint kept from the tail run ``name``'s twin (same seed), or None if none is."""
    return newest_checkpoint(scale.kept_folder(twin_of(scale, name)[2]))


def from_kept_twin(scale: Scale, point: Point, seed: int) -> None:
    """Before a tail run's turn (``run_grid``'s ``prepare``): a run not begun anywhere goes on from
    its twin's kept checkpoint, if there is one, instead of training the twin's epochs again."""
    name = point.name(seed)
    if SETTINGS[point.tag].twin is None or finished(scale, name) or epochs_done(scale, name):
        return
    start = head_start(scale, point, seed)
    checkpoint = None if start.here or start.carried else twin_checkpoint(scale, name)
    if checkpoint is not None:
        go_on_from_twin(scale, name, checkpoint)


def go_on_from_twin(scale: Scale, name: str, checkpoint: Path) -> Path:
    """Starts the tail run ``name`` (a setting with a ``twin``) from its constant twin's
    ``checkpoint``, taken at an epoch's end at or before the tail's first epoch
    (``claims.runner.go_on_from``: carried for the next launch, the twin's curve rows copied).
    Returns the carried copy."""
    point, seed, twin, start = twin_of(scale, name)
    return go_on_from(scale, point, seed, twin, checkpoint, start)


# ----------------------------------------------------------------------------- the claims grid's runs


def import_claims(out: Path, claims: Path) -> List[str]:
    """Copies the claims grid's runs of ``CLAIMS_IMPORTS`` (both seeds) into ``out``'s CSVs as
    the setting's runs of those epochs (``lr5e-4-e{SCREEN_EPOCHS}-s*``, ``lr5e-4-e{RECORD_EPOCHS}-s*``,
    ``m4-e{SCREEN_EPOCHS}-s*``, likewise m8 and d64: their first epochs): without a schedule a shorter run is the
    longer one's prefix (``claims.runner.prefix_run``), so these are the runs the speedrun would
    train. Each row names its source; a run already in ``out`` is left alone. Returns the runs
    added."""
    curves, results = read_csv(out / "curves.csv"), read_csv(out / "results.csv")
    claims_curves, claims_results = read_csv(claims / "curves.csv"), read_csv(claims / "results.csv")
    added = []
    for tag, (point, all_epochs) in CLAIMS_IMPORTS.items():
        for seed in (1, 2):
            source = point.name(seed)
            rows = curve_of(claims_curves, source)
            final = next((r for r in claims_results if r["run"] == source), None)
            for epochs in all_epochs:
                name = SETTINGS[tag].point(epochs).name(seed)
                if final is None or len(rows) < epochs or any(r["run"] == name for r in results):
                    continue
                copied = [{**r, "run": name, "source": source} for r in rows[:epochs]]
                curves = [r for r in curves if r["run"] != name] + copied
                last = {k: copied[-1][k] for k in final if k in copied[-1]}
                where = f"claims grid's {source}, commit {final.get('commit', '?')}"
                results.append({**final, **last, "run": name, "epochs": epochs, "source": where})
                added.append(name)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "curves.csv", curves)
    write_csv(out / "results.csv", results)
    return added


# ----------------------------------------------------------------------------- CLI


def list_plan(scale: Scale) -> None:
    """The plan's runs and their status."""
    curves = read_csv(scale.curves)
    print("| run | status | last kNN |\n|---|---|---|")
    for point, seed in plan(scale):
        name = point.name(seed)
        rows = curve_of(curves, name)
        status = "done" if finished(scale, name) else f"epoch {rows[-1]['epoch']}/{point.epochs}" if rows else "to do"
        print(f"| {name} | {status} | {rows[-1]['knn_backbone'] if rows else '-'} |")


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(parser)
    parser.add_argument(
        "--only",
        help="only the run of this name, else runs whose name contains this; with --step-times: these settings, "
        "comma-separated",
    )
    parser.add_argument("--list", action="store_true", help="the plan and its status")
    parser.add_argument("--report", action="store_true", help="records, levers, summary and plot from the CSVs")
    parser.add_argument("--step-times", action="store_true", help="every setting's step beside the baseline's")
    parser.add_argument(
        "--import-claims", action="store_true", help="the claims grid's runs of the const setting, as its runs"
    )
    parser.add_argument(
        "--from-twin", nargs="?", const="", metavar="CKPT",
        help="with --only <a tail run>: start it from its constant twin's checkpoint CKPT (an epoch's end up to the "
        "tail's start); without CKPT, the one the twin's run kept there (kept/<twin>/)",
    )  # fmt: skip
    parser.add_argument("--results", type=Path, help="results folder (default: benchmarks/results/speedrun[_gpu])")
    parser.add_argument("--scale", choices=sorted(SCALES), default="cpu", help="cpu, or the GPU twin")
    args, until = parse_run_arguments(parser, argv)
    out = args.results or (OUT if args.scale == "cpu" else OUT.with_name("speedrun_gpu"))
    scale = scale_named(args.scale, out)  # the claims harness's CSVs and runs, in this folder
    if args.run:
        point, seed = find(scale, args.run)
        run_child(scale, point, seed, args.pause_log, keepers(scale, point, seed))
    elif args.list:
        list_plan(scale)
    elif args.step_times:
        measure_step_times(scale, args.rounds, args.steps, args.only.split(",") if args.only else None)
    elif args.import_claims:
        added = import_claims(out, CLAIMS_STEP_TIMES.parent)
        print(f"speedrun: {', '.join(added) or 'nothing new'} from the claims grid into {out}")
    elif args.from_twin is not None:
        if not args.only:
            parser.error("--from-twin needs --only <the tail run>")
        checkpoint = Path(args.from_twin) if args.from_twin else twin_checkpoint(scale, args.only)
        if checkpoint is None:
            parser.error(f"--from-twin: no checkpoint kept from {args.only}'s twin in {scale.out / 'kept'}: name one")
        go_on_from_twin(scale, args.only, checkpoint)
    elif args.report:
        report(out, README if args.scale == "cpu" else None, LEVERS_DOC if args.scale == "cpu" else None)
    elif args.budget_min is not None or until is not None:
        run_budget(scale, plan(scale), Path(__file__), args, until, lambda p, seed: from_kept_twin(scale, p, seed))
    else:
        no_action(parser, args)


if __name__ == "__main__":
    main()
