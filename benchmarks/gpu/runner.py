"""Install the offline kit on a GPU machine and run a list of entry-point commands under a time budget.

    python benchmarks/gpu/runner.py --kit .kit --out $OUT --runs benchmarks/gpu/runs/smoke.txt --budget-s 540
    python benchmarks/gpu/runner.py --dry-run --out /tmp/dry-out        # the same on this CPU, tiny

One call: keep the parts carried in ``--kit`` under ``--prefix`` and install each kit whose parts
are all kept (``kit_parts.py``); check the runs' imports; run the runs file's unfinished lines
until the budget is spent (a run cut by it gets SIGINT, then SIGTERM, then SIGKILL, and resumes
from its checkpoint next call through the entry points' auto-resume); write
``$OUT/results-<time>.tar.gz`` (runner.json, state, the runs' small files, logs) for ``collect.py``.
The runs file's format: ``runs_file.py``. Standard library only, Python 3.9+.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Optional

import pack
from kit_parts import MIB, START, install_kits, load_json, receive, save_json, say, utc
from pack import REPO
from runs_file import argv_of, fill, fill_runs, merge, parse_runs, select_runs

#: dry run: the keys that make a CIFAR recipe take seconds on a CPU (tests/conftest.py tiny_overrides)
TINY = ["data.num_workers=0", "backbone.name=narrow_resnet18", "+backbone.kwargs.width=8", "max_epochs=1"]
TINY += ["method_kwargs.proj_output_dim=16", "optimizer.batch_size=8", "accelerator=cpu", "precision=32"]
#: the same for solo-learn's own main_pretrain.py (through solo_script.py): only its keys, one CPU process
TINY_SOLO = TINY + ["devices='1'", "strategy=auto", "sync_batchnorm=false"]
TINY += ["knn_eval.k=5"]
SOLO_SCRIPT = "benchmarks/gpu/solo_script.py"
DRY_RUNS = """\
# The dry run's own list: one tiny pretraining with online kNN, resumable like the real ones.
all: data.train_path={data}/train data.val_path={data}/test wandb.enabled=false
all: checkpoint.dir={out} auto_resume.enabled=true
tiny-mabt: main_pretrain.py --config-name mabt_cifar.yaml knn_eval.enabled=true
"""
ARCHIVE_LIMIT = 15 * MIB  # uncompressed; the device brings back files of at most 16 MiB
LOG_KEEP = (256 * 1024, 1536 * 1024)  # head and tail bytes kept of a long log in the archive
SKIP_SUFFIXES = (".ckpt", ".ckpt.part", ".pt", ".pth", ".npy", ".npz", ".whl")
#: seconds the import check is allowed in the least budget (it took 13.7 to 26 s on the H200)
ENV_CHECK_S = 30.0


class Budget(Exception):
    """Raised by the SIGTERM handler: the device tool is ending this call; save state and archive."""


def run_env(prefix: Path) -> dict:
    """The runs' environment: the kit's packages first, then the repository, then the target's own."""
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_SERVICE", "WANDB_DIR")}
    paths = [str(prefix / "site"), str(REPO), env.get("PYTHONPATH", "")]
    env.update(PYTHONPATH=os.pathsep.join(p for p in paths if p), PYTHONUNBUFFERED="1", HYDRA_FULL_ERROR="1")
    env.update(WANDB_MODE="offline", WANDB_SILENT="true")
    return env


ENV_CHECK = r"""
import importlib, json, sys
out = {"python": sys.version.split()[0]}
for name in ("torch", "torchvision", "lightning", "torchmetrics", "hydra", "omegaconf", "timm", "scipy", "sklearn",
             "solo", "mvssl_plugin", "nvidia.dali", "kornia"):
    try:
        module = importlib.import_module(name)
        out[name] = getattr(module, "__version__", "?") + " " + str(getattr(module, "__file__", ""))
    except Exception as error:  # DALI and kornia only some lines need: reported, not required
        out[name] = "IMPORT FAILED: %r" % (error,)
        out["failed"] = out.get("failed") or name not in ("nvidia.dali", "kornia")
import torch
out["cuda"] = torch.cuda.is_available()
out["device"] = torch.cuda.get_device_name(0) if out["cuda"] else "cpu"
out["bf16"] = bool(out["cuda"] and torch.cuda.is_bf16_supported())
print("ENV " + json.dumps(out))
"""


def check_env(prefix: Path) -> dict:
    """Imports what the runs import, with the runs' PYTHONPATH: versions, file locations, the device."""
    t0 = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-c", ENV_CHECK], env=run_env(prefix), capture_output=True, text=True, timeout=300
        )
        line = [x for x in done.stdout.splitlines() if x.startswith("ENV ")]
        result = json.loads(line[-1][4:]) if line else {"failed": True, "stderr": done.stderr[-3000:]}
    except subprocess.TimeoutExpired:
        result = {"failed": True, "error": "import check took over 300 s"}
    return dict(result, seconds=round(time.monotonic() - t0, 1))


def gpu_name() -> str:
    """The GPU's name from ``nvidia-smi`` (under a second), so a call with ``--skip-env-check`` still
    names its device; ``cpu`` where there is none."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return "cpu"
    names = done.stdout.strip().splitlines()
    return names[0].strip() if done.returncode == 0 and names else "cpu"


def kill_wait(grace_s: float) -> float:
    """Seconds given to SIGTERM and then to SIGKILL after the SIGINT grace."""
    return min(10.0, grace_s)


def held_back(args: argparse.Namespace) -> float:
    """Seconds kept from a run's timeout: the stop's grace and kill waits, the archive's reserve."""
    return args.reserve_s + args.grace_s + 2 * kill_wait(args.grace_s)


def stop(process: subprocess.Popen, grace_s: float) -> None:
    """SIGINT first (Lightning stops between steps, checkpoint writes finish), then SIGTERM, then SIGKILL."""
    for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGTERM, kill_wait(grace_s)), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
            process.wait(wait_s)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def run_all(runs: list, prefix: Path, data: Optional[str], args: argparse.Namespace, report: dict) -> None:
    """Runs the unfinished runs in file order while the budget lasts; ``state.json`` says what is finished."""
    state = load_json(prefix / "state.json", {"runs": {}})
    env, trained = run_env(prefix), prefix / "trained_models"
    for name, tokens in runs:
        if data is None and any("{data}" in t for t in tokens):
            say(f"run {name}: the data is not installed yet, skipped")
            continue
        tokens, waiting = fill_runs(tokens, trained)
        if waiting:
            say(f"run {name}: waits for the run folder of {', '.join(waiting)}, skipped")
            continue
        folder = trained / name
        argv = argv_of(fill(tokens, data=data or "", out=str(folder), prefix=str(prefix), repo=str(REPO)))
        key = hashlib.sha256("\0".join(argv[1:]).encode()).hexdigest()[:16]
        entry = state["runs"].get(name)
        if entry is None or entry.get("key") != key:  # new, or its command changed: start over
            entry = state["runs"][name] = {"key": key, "status": "new", "attempts": 0, "seconds": 0.0, "exit_codes": []}
        if entry["status"] == "done" or (entry["status"] == "failed" and not args.retry_failed):
            say(f"run {name}: {entry['status']} before, skipped")
            continue
        left = args.budget_s - (time.monotonic() - START)
        timeout = left - held_back(args)
        if timeout < args.min_run_s:
            say(f"run {name}: {left:.0f} s left of the budget, left for the next call")
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
        rc, seconds = process.returncode, round(time.monotonic() - t0, 1)
        entry.update(
            status="unfinished" if cut else ("done" if rc == 0 else "failed"),
            seconds=round(entry["seconds"] + seconds, 1),
        )
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
        save_json(prefix / "state.json", state)
        say(f"run {name}: {entry['status']} (exit {rc}) after {seconds} s; log {log}")
        if cut:
            break
    report["state"] = {
        n: {k: e[k] for k in ("status", "attempts", "seconds", "exit_codes")} for n, e in state["runs"].items()
    }


def log_bytes(path: Path) -> bytes:
    """A log as it goes into the archive: its head and tail when it is long."""
    size, (head, tail) = path.stat().st_size, LOG_KEEP
    with open(path, "rb") as f:
        if size <= head + tail:
            return f.read()
        start = f.read(head)
        f.seek(size - tail)
        return start + f"\n[... {size - head - tail} bytes cut by the runner ...]\n".encode() + f.read()


def write_archive(out: Path, prefix: Path, report: dict) -> Path:
    """One ``results-<time>.tar.gz`` under 16 MiB: runner.json, the state, the runs' small files (no
    weights, no wandb copies), then the logs newest first; what does not fit is named, not packed."""
    out.mkdir(parents=True, exist_ok=True)
    now = time.time()  # to the millisecond, so that names sort as the calls were made
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + f"-{int(now * 1000) % 1000:03d}"
    if (out / f"results-{stamp}.tar.gz").exists():  # never replace an earlier call's archive
        stamp += "-" + str(next(n for n in range(2, 10**6) if not (out / f"results-{stamp}-{n}.tar.gz").exists()))
    entries = [("state.json", prefix / "state.json")] if (prefix / "state.json").is_file() else []
    trained, logs = prefix / "trained_models", prefix / "logs"
    for path in sorted(trained.rglob("*")) if trained.is_dir() else []:
        if path.is_file() and not {"wandb", "__pycache__", "multirun"} & set(path.relative_to(trained).parts):
            if not path.name.endswith(SKIP_SUFFIXES) and path.stat().st_size <= 4 * MIB:
                entries.append((f"runs/{path.relative_to(trained).as_posix()}", path))
    newest = sorted(logs.rglob("*.log"), key=lambda p: p.stat().st_mtime, reverse=True) if logs.is_dir() else []
    entries += [(f"logs/{p.relative_to(logs).as_posix()}", p) for p in newest]
    chosen, total, left_out = [], 0, []
    for name, source in entries:
        data = log_bytes(source) if name.startswith("logs/") else source.read_bytes()
        if total + len(data) > ARCHIVE_LIMIT:
            left_out.append(name)
            continue
        chosen.append((name, data))
        total += len(data)
    report.update(archive={"files": len(chosen) + 1, "bytes_uncompressed": total, "left_out": left_out})
    report.update(end=utc(time.time()), seconds=round(time.monotonic() - START, 1))
    path = out / f"results-{stamp}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in [("runner.json", json.dumps(report, indent=1).encode()), *chosen]:
            info = tarfile.TarInfo(f"results-{stamp}/{name}")
            info.size, info.mtime = len(data), int(now)
            tar.addfile(info, io.BytesIO(data))
    say(f"results: {path} ({path.stat().st_size / MIB:.2f} MiB, {len(chosen) + 1} files, {len(left_out)} left out)")
    return path


def on_sigterm(signum: int, frame: object) -> None:
    raise Budget()


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--kit", type=Path, help="manifest.json and the parts carried (default .kit; dry run <prefix>/dry-kit)"
    )
    parser.add_argument("--out", type=Path, help="where results-<time>.tar.gz goes ($OUT on the device)")
    parser.add_argument("--runs", type=Path, help="runs file; without it: install only")
    parser.add_argument("--budget-s", type=float, default=540.0, help="seconds for this whole call")
    parser.add_argument("--prefix", type=Path, help="kept between calls: parts, site, data, runs (default /tmp/mvssl)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides for every run (they win)")
    parser.add_argument("--grace-s", type=float, help="after SIGINT, before SIGTERM (default 45; dry run 10)")
    parser.add_argument("--reserve-s", type=float, help="kept for the archive at the end (default 15; dry run 5)")
    parser.add_argument("--min-run-s", type=float, help="start no run with less time than this (default 60; dry run 5)")
    parser.add_argument("--skip-env-check", action="store_true", help="skip importing the runs' packages first")
    parser.add_argument("--skip", nargs="+", default=[], metavar="NAME", help="leave these runs out of this call")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these runs of the file (in its order)")
    parser.add_argument("--retry-failed", action="store_true", help="run again runs that failed in an earlier call")
    parser.add_argument("--dry-run", action="store_true", help="on this CPU: a tiny kit (pack.tiny_kit), tiny runs")
    args = parser.parse_args(argv)
    for key, real, dry in (("grace_s", 45.0, 10.0), ("reserve_s", 15.0, 5.0), ("min_run_s", 60.0, 5.0)):
        if getattr(args, key) is None:
            setattr(args, key, dry if args.dry_run else real)
    text = args.runs.read_text() if args.runs is not None and args.runs.is_file() else None
    if args.runs is not None and text is None:
        parser.error(f"--runs {args.runs}: no such file")
    if text is None and args.dry_run:
        text = DRY_RUNS
    # a call's seconds are the scarcest thing here: fail before spending any
    chosen = select_runs(parse_runs(text), args.skip, args.only) if text is not None else None
    checks = not args.skip_env_check and not args.dry_run
    least = args.min_run_s + held_back(args) + (ENV_CHECK_S if checks else 0.0)
    if chosen is not None and args.budget_s < least:
        parser.error(
            f"--budget-s {args.budget_s:g} starts no run: each run needs --min-run-s ({args.min_run_s:g}) plus the "
            f"stop's grace, kill waits, the archive's reserve and the import check ({least - args.min_run_s:g} s). "
            f"Give --budget-s {least:g} or more, or a smaller --grace-s / --reserve-s"
        )
    prefix = (args.prefix or Path("/tmp/mvssl-dry" if args.dry_run else "/tmp/mvssl")).resolve()
    prefix.mkdir(parents=True, exist_ok=True)
    kit = args.kit or (prefix / "dry-kit" if args.dry_run else REPO / ".kit")
    signal.signal(signal.SIGTERM, on_sigterm)
    report: dict = {
        "start": utc(time.time()),
        "budget_s": args.budget_s,
        "dry_run": args.dry_run,
        "prefix": str(prefix),
    }
    report.update(repo_commit=pack.repo_commit(REPO), python=sys.version.split()[0], host=platform.node())
    report.update(argv=sys.argv[1:] if argv is None else argv, install=[], runs=[], kit_bad=[])
    try:
        if args.dry_run and not (kit / "manifest.json").is_file():
            manifest = pack.tiny_kit(kit, REPO.parent / "shared" / "solo-learn")
            say(f"dry-run kit: {len(manifest['parts'])} parts, {manifest['bytes'] / 1024:.0f} KiB in {kit}")
        receive(kit, prefix, report)
        data = install_kits(prefix, report)
        if not args.skip_env_check:
            report["env"] = check_env(prefix)
            report["device"] = report["env"].get("device", "unknown")
            env = report["env"]
            say(f"environment: {report['device']}, torch {env.get('torch', '?').split()[0]} ({env['seconds']} s)")
        else:
            report["device"] = gpu_name()
        if report.get("env", {}).get("failed"):
            say("imports fail with the kit's PYTHONPATH: no run started (see runner.json env)")
        elif chosen is not None:
            dry = lambda tokens: (TINY_SOLO if tokens[:1] == [SOLO_SCRIPT] else TINY) if args.dry_run else []  # noqa: E731
            run_all([(n, merge(t, dry(t) + args.set)) for n, t in chosen], prefix, data, args, report)
    except Budget:
        say("SIGTERM: writing what there is")
    except Exception as error:  # the archive still comes back with what there is, and says why
        report["error"] = repr(error)
        say(f"runner failed: {error!r}")
    write_archive(args.out or prefix / "out", prefix, report)
    failed = [r for r in report["runs"] if r["status"] == "failed"]
    return 1 if failed or report.get("env", {}).get("failed") or report["kit_bad"] or "error" in report else 0


if __name__ == "__main__":
    sys.exit(main())
