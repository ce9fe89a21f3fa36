"""The paper's three claims on all of CIFAR-10, on a CPU, in pieces that resume.

    python benchmarks/cpu_claims.py --list                  # the grid and what is done
    python benchmarks/cpu_claims.py --budget-min 120        # run the next runs for 2 hours
    python benchmarks/cpu_claims.py --report                # summary.md and plots from the CSVs
    python benchmarks/cpu_claims.py --step-times            # wall-clock: every step, side by side

Every run pretrains through the plugin's own flow (``main_pretrain.py``'s ``pretrain``, the
CPU recipes ``mabt_cifar_cpu.yaml`` / ``mavicreg_cifar_cpu.yaml``): all 50,000 training
JPEGs of ../shared/data/cifar10 (or ``CIFAR10_DIR``, or ``data.fraction`` of them for the
data claim: solo-learn's stratified subsets), ``data.format=memory``, the width-16 CIFAR
ResNet-18, batch 128, the authors' optimizer (Adam, constant learning rate), precision
``auto`` (bf16 autocast on a CPU with native bf16), no online validation. After every
epoch a callback measures, outside the training clock:

* the backbone's kNN top-1 on all 10,000 test images, the bank all 50,000 training
  images (plain normalized, whatever fraction the run trains on): solo-learn's weighted
  kNN, k = 20, cosine, T = 0.07;
* RankMe of the projector's (and backbone's) test embeddings;
* the clocks: training seconds (Lightning's epochs, without this evaluation, less the
  time the run was paused, see below), views processed (steps x batch x m).

Each epoch appends a row to ``curves.csv``; a finished run appends one row to
``results.csv``. A run is a child process with its own checkpoint folder; a call runs the
next unfinished runs, most decisive first, until ``--budget-min`` is spent, then stops the
running one with SIGTERM (the plugin writes its ``-stopped.ckpt``); the next call resumes
it there (auto-resume), on this machine. ``results.csv`` and ``curves.csv`` are committed,
so the grid also continues elsewhere. A stopped run goes on elsewhere too: its checkpoint
(with args.json, run.json, metrics.csv) is copied into ``carry/<run>/`` to be committed, if
it is at most ``CARRY_MAX_MB`` (16 MiB: the width-16 runs up to d = 256, about 10 MiB with
Adam's state; not the d = 2048 ones), and a machine without the run's folder (or with a
checkpoint whose args.json is gone, as ``git clean`` leaves it) resumes it from there, however
long it waited (auto-resume's 36 h window is lifted); the finished row's ``cpu`` and
``precision`` then name each machine's epochs, and ``carry/<run>/`` is deleted. A larger one
would start over elsewhere, so a call skips such a run when its budget cannot finish it, by an
estimate from the epochs already in ``curves.csv`` (this machine's own, where it has any:
``--list`` gives each run's minutes left here and their sum), and goes on to the next run
(``--start-anyway`` starts it all the same); a run small enough to carry always starts, and a
run resumed here or carried always goes on.
The budget counts minutes the harness was not paused. ``--until HH:MM`` (this machine's clock)
ends the call at that time whatever the pauses, e.g. to leave the end of a session to the
test suite; with ``--budget-min`` too, whichever comes first.

Pausing: other work on a small machine pauses the runs with SIGSTOP to the process group
whose id ``--pgid-file`` holds, and logs each pause in ``--pause-log`` (``<unix time>
stop|cont``): the paused seconds inside an epoch are taken off its training seconds, those
before a stop inside it too (the checkpoint carries them into the resume).
Wall-clock claims still come from step times measured side by side in one quiet run:
``--step-times`` times every distinct step of the grid (method, m, d, width), the settings
alternating within each round (``benchmarks/step_clock.py``), into
``step_times.csv``; the report turns views-to-reach into seconds with them. Training
seconds of runs that shared a machine are indicative only.

Because the optimizer has no schedule, a shorter run is a prefix of a longer one: a run goes
on from the end of a finished shorter run of its setting whose checkpoint is on this machine
(its folder and curve rows copied; the first launch names the copied checkpoint in
``resume_from_checkpoint`` with ``auto_resume.accept_changes`` for the one change,
``max_epochs``, which solo-learn's auto-resume would not match; later launches auto-resume).
The epoch budgets below put the data claim at equal views processed, and run 4 and 8 views
to twice the baseline's views (about the baseline's time at their step rates), so that each
shows whether and when it reaches the baseline's final kNN.

``--scale gpu`` runs the same grid at the paper's backbone: the standard ResNet-18 (width 64,
the CIFAR stem), ``accelerator=gpu``, bf16 mixed precision, results in
``benchmarks/results/gpu_claims/`` (or ``--results``), the same report; the CPU-only questions
(bf16 against fp32 on a CPU, the backbone's width) are left out. The GPU kit runs it
(``benchmarks/gpu/runs/claims.txt``): a call cut by the kit's budget (SIGINT) stops the running
run at a checkpoint, and the next call resumes it.

This file is the command line; the harness is the ``claims`` package beside it: ``claims.grid``
(the runs), ``claims.clocks`` (their time), ``claims.verdicts`` and ``claims.report`` (the
verdicts and the report), ``claims.runner`` (running them).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional, Sequence

from claims.cli import add_run_arguments, no_action, parse_run_arguments, run_budget
from claims.clocks import measure_step_times
from claims.grid import REPO, SCALES, find_point, scale_named, schedule
from claims.report import report
from claims.runner import list_grid, run_child


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(parser)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--only", help="only the run of this name, else runs whose name contains this")
    parser.add_argument("--list", action="store_true", help="the grid and its status")
    parser.add_argument("--report", action="store_true", help="summary.md and plots from the CSVs")
    parser.add_argument(
        "--step-times", action="store_true", help="every distinct step of the grid, side by side (machine alone)"
    )
    parser.add_argument(
        "--scale", choices=sorted(SCALES), default="cpu", help="cpu, or the same grid at ResNet-18 on a GPU"
    )
    parser.add_argument("--results", type=Path, help="results folder (default: benchmarks/results/<scale>_claims)")
    args, until = parse_run_arguments(parser, argv)
    scale = scale_named(args.scale, args.results)
    if args.run:
        run_child(scale, *find_point(scale, args.run), args.pause_log)
    elif args.list:
        list_grid(scale, args.seeds)
    elif args.step_times:
        measure_step_times(scale, args.rounds, args.steps)
    elif args.report:
        report(scale, REPO / "docs" / "claims.md" if scale.name == "cpu" and args.results is None else None)
    elif args.budget_min is not None or until is not None:
        run_budget(scale, schedule(scale, args.seeds), Path(__file__), args, until)
    else:
        no_action(parser, args)


if __name__ == "__main__":
    main()
