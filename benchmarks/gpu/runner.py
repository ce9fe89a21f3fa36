"""Install the offline kit on a GPU machine and run a list of entry-point commands under a time budget.

    python benchmarks/gpu/runner.py --kit .kit --out $OUT --runs benchmarks/gpu/runs/views.txt --budget-s 540
    python benchmarks/gpu/runner.py --dry-run --out /tmp/dry-out        # the same on this CPU, tiny

One call: (1) take the kit parts present in ``--kit`` (sha256-checked, kept under ``--prefix`` so
parts can arrive over several calls while the machine stays warm), (2) install each kit item
whose parts are all there (wheels, solo-learn, data; a stamp file skips what is done), (3) run
the runs file's unfinished commands until the budget is spent (a run cut by the budget is
stopped with SIGINT, then SIGTERM, and resumes from its last checkpoint in the next call, through
the entry points' auto-resume), (4) write ``$OUT/results-<time>.tar.gz``: the runs' small files,
logs and ``runner.json``.

Runs file: one ``name: command`` per line, ``#`` comments, placeholders ``{data}`` (the kit's
ImageFolder root), ``{out}`` (the run's own folder, for ``checkpoint.dir``), ``{prefix}``, ``{repo}``,
``{run:NAME}`` (the run folder, with its args.json and checkpoint, that the line NAME trained: a
line naming one waits for it). A line ``all: key=value ...`` adds Hydra overrides to every run
after it (a run's own value wins); an empty ``all:`` drops them for the lines after it (scripts
with flags of their own, such as solo-learn's ``main_umap.py``).
A command starting with ``<script>.py`` runs as ``python <repo>/<script>.py``.

Standard library only at top level, Python 3.9+: it must run before anything is installed.
This file is the command line and the runs' loop; its parts are the modules beside it, the same
kind: ``runner_call`` (the call's clock, its lines, state files), ``kit_install`` (parts and
items), ``runs_file`` (the runs file) and ``results_archive`` (the archive).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from kit_install import prepare
from results_archive import write_archive
from runner_call import CLOCK, REPO, load_json, save_json, say, utc
from runs_file import argv_of, fill, fill_runs, merge, parse_runs, select_runs

# Dry run: the keys that make a CIFAR recipe take seconds on a CPU (tests/conftest.py tiny_overrides).
TINY = [
    "data.num_workers=0",
    "backbone.name=narrow_resnet18",
    "+backbone.kwargs.width=8",
    "method_kwargs.proj_output_dim=16",
    "optimizer.batch_size=8",
    "max_epochs=1",
    "accelerator=cpu",
    "precision=32",
    "knn_eval.k=5",
]
#: the same for solo-learn's own main_pretrain.py (through solo_script.py): only its own keys, one CPU process
TINY_SOLO = [t for t in TINY if not t.startswith("knn_eval.")] + [
    "devices='1'",
    "strategy=auto",
    "sync_batchnorm=false",
]
SOLO_SCRIPT = "benchmarks/gpu/solo_script.py"
DRY_RUNS = """\
# The dry run's own list: one tiny pretraining with online kNN, resumable like the real ones.
all: data.train_path={data}/train data.val_path={data}/test wandb.enabled=false
all: checkpoint.dir={out} auto_resume.enabled=true
tiny-mabt: main_pretrain.py --config-name mabt_cifar.yaml knn_eval.enabled=true
"""


class Budget(Exception):
    """Raised by the SIGTERM handler: the device tool is ending this call; save state and archive."""


# ---------------------------------------------------------------- runs


def run_env(prefix: Path) -> dict:
    """The runs' environment: the kit's packages first, then the repository, then the target's own."""
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_SERVICE", "WANDB_DIR")}
    paths = [str(prefix / "site"), str(REPO), env.get("PYTHONPATH", "")]
    env.update(
        PYTHONPATH=os.pathsep.join(p for p in paths if p),
        PYTHONUNBUFFERED="1",
        HYDRA_FULL_ERROR="1",
        WANDB_MODE="offline",
        WANDB_SILENT="true",
    )
    return env


ENV_CHECK = r"""
import importlib, json, sys
out = {"python": sys.version.split()[0]}
for name in ("torch", "torchvision", "lightning", "torchmetrics", "hydra", "omegaconf", "timm", "scipy", "sklearn",
             "solo", "mvssl_plugin"):
    try:
        module = __import__(name)
        out[name] = getattr(module, "__version__", "?") + " " + str(getattr(module, "__file__", ""))
    except Exception as error:
        out[name] = "IMPORT FAILED: %r" % (error,)
        out["failed"] = True
for name in ("nvidia.dali", "kornia"):  # needed by some lines only: reported, not required
    try:
        module = importlib.import_module(name)
        out[name] = getattr(module, "__version__", "?") + " " + str(getattr(module, "__file__", ""))
    except Exception as error:
        out[name] = "not importable: %r" % (error,)
try:
    import torch
    out["cuda"] = torch.cuda.is_available()
    out["device"] = torch.cuda.get_device_name(0) if out["cuda"] else "cpu"
    out["bf16"] = bool(out["cuda"] and torch.cuda.is_bf16_supported())
except Exception as error:
    out["device"] = "unknown (%r)" % (error,)
print("ENV " + json.dumps(out))
"""


def check_env(prefix: Path) -> dict:
    """Imports what the runs import, with the runs' PYTHONPATH: versions, file locations and the device."""
    t0 = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-c", ENV_CHECK], env=run_env(prefix), capture_output=True, text=True, timeout=300
        )
        line = [x for x in done.stdout.splitlines() if x.startswith("ENV ")]
        result = json.loads(line[-1][4:]) if line else {"failed": True, "stderr": done.stderr[-3000:]}
    except subprocess.TimeoutExpired:
        result = {"failed": True, "error": "import check took over 300 s"}
    result["seconds"] = round(time.monotonic() - t0, 1)
    return result


def dry_overrides(tokens: list, dry_run: bool) -> list:
    """The overrides that shrink a run to seconds on this CPU (none outside a dry run)."""
    if not dry_run:
        return []
    return TINY_SOLO if tokens and tokens[0] == SOLO_SCRIPT else TINY


#: seconds the import check is allowed for in ``least_budget`` (it took 13.7 to 20.0 s on the H200)
ENV_CHECK_S = 30.0


def gpu_name() -> str:
    """The GPU's name from ``nvidia-smi`` (under a second; the import check takes 14 to 20 s), so a
    call with ``--skip-env-check`` still names its device; ``cpu`` where there is none."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return "cpu"
    names = done.stdout.strip().splitlines()
    return names[0].strip() if done.returncode == 0 and names else "cpu"


def held_back(args: argparse.Namespace) -> float:
    """Seconds :func:`run_all` keeps from a run's timeout: the stop's grace and kill waits, the archive's reserve."""
    return args.reserve_s + args.grace_s + 2 * kill_wait(args.grace_s)


def least_budget(args: argparse.Namespace) -> float:
    """The smallest ``--budget-s`` that can start a run: ``--min-run-s`` plus what is held back,
    plus the import check's time when it runs."""
    checks = not args.skip_env_check and not args.dry_run
    return args.min_run_s + held_back(args) + (ENV_CHECK_S if checks else 0.0)


def kill_wait(grace_s: float) -> float:
    """Seconds given to SIGTERM and then to SIGKILL after the SIGINT grace."""
    return min(10.0, grace_s)


def stop(process: subprocess.Popen, grace_s: float) -> None:
    """SIGINT first (Lightning shuts down between steps, checkpoint writes finish), then SIGTERM, then SIGKILL."""
    for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGTERM, kill_wait(grace_s)), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_all(runs: list, prefix: Path, data: Optional[str], args: argparse.Namespace, report: dict) -> None:
    """Runs the unfinished runs in file order while the budget lasts; the state file says what is finished."""
    state_path = prefix / "state.json"
    state = load_json(state_path, {"runs": {}})
    env = run_env(prefix)
    for name, tokens in runs:
        folder = prefix / "trained_models" / name
        if data is None and any("{data}" in t for t in tokens):
            say(f"run {name}: the data is not installed yet, skipped")
            continue
        tokens, waiting = fill_runs(tokens, prefix / "trained_models")
        if waiting:
            say(f"run {name}: waits for the run folder of {', '.join(waiting)}, skipped")
            continue
        argv = argv_of(fill(tokens, data=data, out=str(folder), prefix=str(prefix), repo=str(REPO)))
        key = hashlib.sha256("\0".join(argv[1:]).encode()).hexdigest()[:16]
        entry = state["runs"].get(name)
        if entry is None or entry.get("key") != key:  # new, or its command changed: start over
            entry = state["runs"][name] = {
                "key": key,
                "status": "new",
                "attempts": 0,
                "seconds": 0.0,
                "exit_codes": [],
                "command": shlex.join(argv),
            }
        if entry["status"] == "done" or (entry["status"] == "failed" and not args.retry_failed):
            say(f"run {name}: {entry['status']} before, skipped")
            continue
        timeout = CLOCK.left() - held_back(args)
        if timeout < args.min_run_s:
            say(f"run {name}: {CLOCK.left():.0f} s left of the budget, left for the next call")
            break
        folder.mkdir(parents=True, exist_ok=True)
        entry["attempts"] += 1
        log = prefix / "logs" / name / f"attempt-{entry['attempts']}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        say(f"run {name} (attempt {entry['attempts']}, at most {timeout:.0f} s): {shlex.join(argv)}")
        t0, cut = time.monotonic(), False
        with open(log, "wb") as f:
            process = subprocess.Popen(
                argv, cwd=folder, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
            )
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                cut = True
                stop(process, args.grace_s)
            except Budget:
                cut = True
                stop(process, min(args.grace_s, 15.0))
            rc = process.returncode
        seconds = round(time.monotonic() - t0, 1)
        entry["status"] = "unfinished" if cut else ("done" if rc == 0 else "failed")
        entry["seconds"] = round(entry["seconds"] + seconds, 1)
        entry["exit_codes"].append(rc)
        report["runs"].append(
            {
                "name": name,
                "attempt": entry["attempts"],
                "exit_code": rc,
                "seconds": seconds,
                "cut_by_budget": cut,
                "status": entry["status"],
                "command": shlex.join(argv),
            }
        )
        save_json(state_path, state)
        say(f"run {name}: {entry['status']} (exit {rc}) after {seconds} s; log {log}")
        if cut:
            break
    report["state"] = {
        n: {k: e[k] for k in ("status", "attempts", "seconds", "exit_codes")} for n, e in state["runs"].items()
    }


# ---------------------------------------------------------------- the commit the results come from


def git_commit() -> str:
    """The checkout's commit as :func:`pack.repo_commit` names it (``+dirty`` with changes)."""
    import pack

    return pack.repo_commit(REPO)


# ---------------------------------------------------------------- dry run


def tiny_image_folder(root: Path, per_class: dict, classes: int = 3, size: int = 32) -> Path:
    """Random ``size`` x ``size`` JPEGs, ``root/<split>/class_<c>/NNNN.jpg``, the same bytes every time."""
    from PIL import Image  # the dry run's machine has the project's packages

    rng = random.Random(0)
    for split, n in per_class.items():
        for c in range(classes):
            folder = root / split / f"class_{c}"
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(n):
                pixels = bytes(rng.getrandbits(8) for _ in range(size * size * 3))
                Image.frombytes("RGB", (size, size), pixels).save(folder / f"{i:04d}.jpg")
    return root


def build_dry_kit(prefix: Path, with_solo: bool) -> Path:
    """A kit of tiny parts without wheels (this machine's packages stand in): tiny data, solo-learn if at hand."""
    import pack  # local: packing (and its wheels list) only for a dry run; a neighbour, as the script runs

    src = prefix / "dry-src"
    shutil.rmtree(src, ignore_errors=True)
    data_root = tiny_image_folder(src / "tiny", {"train": 16, "test": 4})
    solo = REPO.parent / "shared" / "solo-learn"
    manifest = pack.build_kit(
        prefix / "dry-kit",
        part_mib=0.04,
        data=data_root,
        solo=solo if with_solo and (solo / "setup.py").is_file() else None,
        needed=[],
        fetch=None,
    )
    say(
        f"dry-run kit: {len(manifest['parts'])} parts, {manifest['total_bytes'] / 1024:.0f} KiB "
        f"({', '.join(i['name'] for i in manifest['items'])})"
    )
    return prefix / "dry-kit"


# ---------------------------------------------------------------- main


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--kit", type=Path, default=REPO / ".kit", help="folder with manifest.json and the parts carried"
    )
    parser.add_argument("--out", type=Path, help="where results-<time>.tar.gz goes ($OUT on the device)")
    parser.add_argument("--runs", type=Path, help="runs file; without it: install only")
    parser.add_argument("--budget-s", type=float, default=540.0, help="seconds for this whole call")
    parser.add_argument("--prefix", type=Path, help="kept between calls: parts, site, data, runs (default /tmp/mvssl)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides for every run (win)")
    parser.add_argument("--grace-s", type=float, help="after SIGINT, before SIGTERM (default 45; dry run 10)")
    parser.add_argument("--reserve-s", type=float, help="kept for the archive at the end (default 15; dry run 5)")
    parser.add_argument("--min-run-s", type=float, help="start no run with less time than this (default 60; dry run 5)")
    parser.add_argument("--skip-env-check", action="store_true", help="skip importing the runs' packages first")
    parser.add_argument(
        "--skip", nargs="+", default=[], metavar="NAME", help="leave these runs of the file out of this call"
    )
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these runs of the file (its order)")
    parser.add_argument("--retry-failed", action="store_true", help="run again runs that failed in an earlier call")
    parser.add_argument("--dry-run", action="store_true", help="on this CPU: tiny kit, tiny runs")
    parser.add_argument(
        "--dry-run-solo",
        choices=["auto", "skip"],
        default="auto",
        help="auto: pack and pip-install ../shared/solo-learn in the dry run when present",
    )
    args = parser.parse_args(argv)
    for key, real, dry in (("grace_s", 45.0, 10.0), ("reserve_s", 15.0, 5.0), ("min_run_s", 60.0, 5.0)):
        if getattr(args, key) is None:
            setattr(args, key, dry if args.dry_run else real)
    chosen = None  # the runs file's runs, parsed and checked before any second is spent
    if args.runs is not None:  # a call's seconds are the scarcest thing here: fail before spending any
        if not args.runs.is_file():
            parser.error(f"--runs {args.runs}: no such file")
        chosen = select_runs(parse_runs(args.runs.read_text()), args.skip, args.only)
        least = least_budget(args)
        if args.budget_s < least:
            parser.error(
                f"--budget-s {args.budget_s:g} starts no run: each run needs --min-run-s ({args.min_run_s:g}) "
                "plus the stop's grace, kill waits, the archive's reserve and the import check "
                f"({least - args.min_run_s:g} s). "
                f"Give --budget-s {least:g} or more, or a smaller --grace-s / --reserve-s"
            )
    CLOCK.restart(args.budget_s)
    prefix = (args.prefix or Path("/tmp/mvssl-dry" if args.dry_run else "/tmp/mvssl")).resolve()
    prefix.mkdir(parents=True, exist_ok=True)
    out = args.out or (prefix / "out")

    def on_term(signum: int, frame: object) -> None:
        raise Budget()

    signal.signal(signal.SIGTERM, on_term)
    report: dict = {
        "start": utc(CLOCK.wall_start),
        "budget_s": args.budget_s,
        "dry_run": args.dry_run,
        "prefix": str(prefix),
        "repo_commit": git_commit(),
        "python": sys.version.split()[0],
        "host": platform.node(),
        "argv": sys.argv[1:],
        "install": [],
        "runs": [],
    }
    kit, extra = args.kit, list(args.set)
    try:
        if args.dry_run:
            kit = build_dry_kit(prefix, with_solo=args.dry_run_solo == "auto")
            chosen = select_runs(parse_runs(DRY_RUNS), args.skip, args.only) if chosen is None else chosen
        manifest = prepare(kit, prefix, report)
        if manifest:
            report["kit"]["repo_commit_packed"] = manifest.get("repo_commit")
        if not args.skip_env_check:
            report["env"] = check_env(prefix)
            report["device"] = report["env"].get("device", "unknown")
            say(
                f"environment: {report['device']}, torch {report['env'].get('torch', '?').split()[0]}, lightning "
                f"{report['env'].get('lightning', '?').split()[0]} ({report['env']['seconds']} s)"
            )
        else:
            report["device"] = gpu_name()
        if chosen is not None:
            data_item = load_json(prefix / "stamp.json", {"items": {}})["items"].get("data")
            if report.get("env", {}).get("failed"):
                say("imports fail with the kit's PYTHONPATH: no run started (see runner.json env)")
            else:
                runs = [(n, merge(t, dry_overrides(t, args.dry_run) + extra)) for n, t in chosen]
                run_all(runs, prefix, str(prefix / "data" / data_item["root"]) if data_item else None, args, report)
    except Budget:
        say("SIGTERM: writing what there is")
    if out is not None:
        write_archive(out, prefix, report)
    failed = [r for r in report["runs"] if r["status"] == "failed"]
    return 1 if failed or report.get("env", {}).get("failed") else 0


if __name__ == "__main__":
    sys.exit(main())
