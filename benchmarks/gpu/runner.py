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
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.util
import json
import os
import platform
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[2]
MIB = 1 << 20
ARCHIVE_LIMIT = 15 * MIB  # uncompressed; the device brings back files of at most 16 MiB
LOG_KEEP = (256 * 1024, 1536 * 1024)  # head and tail bytes kept of a long log in the archive
SMALL_FILE = 4 * MIB
SKIP_SUFFIXES = (".ckpt", ".ckpt.part", ".pt", ".pth", ".npy", ".npz", ".whl")
SKIP_DIRS = {"wandb", "__pycache__", "multirun"}

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


class Clock:
    """Seconds since the runner started, against ``--budget-s``."""

    def __init__(self, budget_s: float) -> None:
        self.restart(budget_s)

    def restart(self, budget_s: float) -> None:
        """Counts from now against ``budget_s`` (``main``: the call's budget starts with it)."""
        self.start = time.monotonic()
        self.budget_s = budget_s
        self.wall_start = time.time()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.budget_s - self.elapsed()


#: the call's clock, which ``say`` prefixes every line with; ``main`` restarts it at the budget
CLOCK = Clock(0.0)


def say(message: str) -> None:
    print(f"[runner {CLOCK.elapsed():6.1f}s] {message}", flush=True)


def utc(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def load_json(path: Path, default: dict) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def save_json(path: Path, data: dict) -> None:
    """Write-then-rename: a kill in the middle leaves the old file, never half of one."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(MIB), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------- kit: parts and items


def receive_parts(manifest: dict, kit: Path, parts_dir: Path) -> dict:
    """Moves the verified parts of ``kit`` into ``parts_dir`` (kept between calls); says which are missing or bad."""
    parts_dir.mkdir(parents=True, exist_ok=True)
    have, missing, bad = [], [], []
    for part in manifest["parts"]:
        name, kept, arrived = part["name"], parts_dir / part["name"], kit / part["name"]
        if kept.is_file() and kept.stat().st_size == part["bytes"] and sha256_file(kept) == part["sha256"]:
            have.append(name)
        elif arrived.is_file():
            got = sha256_file(arrived)
            if got != part["sha256"]:
                bad.append(f"{name}: sha256 {got[:16]} != manifest {part['sha256'][:16]} (re-carry it)")
                continue
            shutil.copyfile(arrived, kept.with_suffix(".tmp"))
            os.replace(kept.with_suffix(".tmp"), kept)
            have.append(name)
        else:
            missing.append(name)
    return {"have": have, "missing": missing, "bad": bad}


def describe_missing(manifest: dict, names: list) -> list:
    """One line per part still to carry: its size and the items waiting for it."""
    lines = []
    for part in manifest["parts"]:
        if part["name"] in names:
            holds = [i["name"] for i in manifest["items"] if part["name"] in i["parts"]]
            lines.append(f"{part['name']} ({part['bytes'] / MIB:.1f} MiB, holds {', '.join(holds)})")
    return lines


def assemble(manifest: dict, item: dict, parts_dir: Path, dest: Path) -> Path:
    """Cuts ``item``'s byte range out of the kept parts into ``dest`` and checks its sha256."""
    digest = hashlib.sha256()
    start, end = item["offset"], item["offset"] + item["bytes"]
    with open(dest, "wb") as out:
        for part in manifest["parts"]:
            lo, hi = max(start, part["offset"]), min(end, part["offset"] + part["bytes"])
            if lo >= hi:
                continue
            with open(parts_dir / part["name"], "rb") as f:
                f.seek(lo - part["offset"])
                left = hi - lo
                while left:
                    block = f.read(min(MIB, left))
                    if not block:
                        raise ValueError(f"{part['name']} is shorter than the manifest says")
                    digest.update(block)
                    out.write(block)
                    left -= len(block)
    if digest.hexdigest() != item["sha256"]:
        raise ValueError(f"{item['name']}: sha256 {digest.hexdigest()[:16]} != manifest {item['sha256'][:16]}")
    return dest


def whole_sha256(manifest: dict, parts_dir: Path) -> str:
    digest = hashlib.sha256()
    for part in manifest["parts"]:
        with open(parts_dir / part["name"], "rb") as f:
            for block in iter(lambda: f.read(MIB), b""):
                digest.update(block)
    return digest.hexdigest()


def extract(archive: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # Python < 3.9.17: the kit is our own archive
            tar.extractall(dest)


def pip_install(args: list, log: Path, env: Optional[dict] = None) -> bool:
    """``python -m pip install`` (offline), its output appended to ``log``; False when pip failed or is absent."""
    if importlib.util.find_spec("pip") is None:
        return False
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-index",
        "--no-deps",
        "--upgrade",
        "--disable-pip-version-check",
        "--no-warn-script-location",
    ] + args
    with open(log, "a") as f:
        f.write("$ " + shlex.join(cmd) + "\n")
        f.flush()
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env).returncode == 0


def unzip_wheel(wheel: Path, target: Path) -> None:
    """Fallback without pip: a wheel is a zip of the package and its dist-info (no scripts needed here)."""
    with zipfile.ZipFile(wheel) as z:
        z.extractall(target, [n for n in z.namelist() if ".data/" not in n.split("/", 1)[0] + "/"])


def importable(module: str) -> bool:
    """Whether the target can import ``module`` (``nvidia.dali`` too, when there is no ``nvidia`` at all)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def install_wheels(archive: Path, item: dict, prefix: Path, log: Path) -> str:
    """pip-installs the kit's wheels into <prefix>/site (runs) and <prefix>/build (solo-learn's build only)."""
    wheel_dir = prefix / item["kind"]
    shutil.rmtree(wheel_dir, ignore_errors=True)
    extract(archive, wheel_dir)
    chosen: dict[str, list] = {"site": [], "build": []}
    notes = []
    for wheel in item["wheels"]:
        if wheel["policy"] == "if_missing" and importable(wheel["module"]):
            notes.append(f"{wheel['module']}: the target has it")
            continue
        chosen[wheel["role"]].append(wheel_dir / wheel["file"])
    for role, wheels in chosen.items():
        if not wheels:
            continue
        target = prefix / role
        target.mkdir(parents=True, exist_ok=True)
        if not pip_install(["--target", str(target)] + [str(w) for w in wheels], log):
            for wheel in wheels:
                unzip_wheel(wheel, target)
            notes.append(f"{role}: pip failed or absent, unzipped instead")
        notes.append(f"{role}: " + " ".join(w.name.split("-")[0] + "-" + w.name.split("-")[1] for w in wheels))
    shutil.rmtree(wheel_dir, ignore_errors=True)
    return "; ".join(notes)


def pip_install_solo(archive: Path, prefix: Path, log: Path) -> str:
    """pip-installs solo-learn's source (no build isolation: offline); copies its package if pip cannot."""
    src = prefix / "src"
    shutil.rmtree(src, ignore_errors=True)
    extract(archive, src)
    site = prefix / "site"
    site.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    build = prefix / "build"
    if build.is_dir():  # the kit's setuptools<70 and wheel, for solo-learn's setup.py
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(build), env.get("PYTHONPATH")]))
    if pip_install(["--no-build-isolation", "--target", str(site), str(src / "solo-learn")], log, env):
        return "pip install --no-build-isolation"
    shutil.rmtree(site / "solo", ignore_errors=True)
    shutil.copytree(src / "solo-learn" / "solo", site / "solo")
    return "pip failed (see install log): copied the solo package into site"


def install_data(archive: Path, item: dict, prefix: Path) -> str:
    root = prefix / "data" / item.get("root", "data")
    shutil.rmtree(root, ignore_errors=True)
    extract(archive, prefix / "data")
    return f"{sum(1 for p in root.rglob('*') if p.is_file())} files under {root}"


def install(manifest: dict, prefix: Path, parts: dict, report: dict) -> None:
    """Installs every item whose parts are all kept and whose sha256 the stamp does not list yet."""
    stamp_path = prefix / "stamp.json"
    stamp = load_json(stamp_path, {"items": {}})
    log = prefix / "logs" / "install.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    for item in manifest["items"]:
        done = stamp["items"].get(item["kind"], {})
        step = {"item": item["name"]}
        if done.get("sha256") == item["sha256"]:
            step.update(status="done before", seconds=0.0)
        elif set(item["parts"]) - set(parts["have"]):
            step.update(status="waiting for " + ", ".join(sorted(set(item["parts"]) - set(parts["have"]))))
        else:
            t0 = time.monotonic()
            archive = prefix / ("assembling-" + item["name"])
            try:
                assemble(manifest, item, prefix / "parts", archive)
                if item["kind"].startswith("wheels"):  # wheels, wheels-dali
                    note = install_wheels(archive, item, prefix, log)
                elif item["kind"] == "solo":
                    note = pip_install_solo(archive, prefix, log)
                else:
                    note = install_data(archive, item, prefix)
            except (OSError, ValueError, tarfile.TarError, zipfile.BadZipFile) as error:
                step.update(status=f"failed: {error}", seconds=round(time.monotonic() - t0, 1))
                say(f"install {item['name']}: {step['status']}")
                report["install"].append(step)
                continue
            finally:
                archive.unlink(missing_ok=True)
            step.update(status="installed", note=note, seconds=round(time.monotonic() - t0, 1))
            stamp["items"][item["kind"]] = {
                "sha256": item["sha256"],
                "name": item["name"],
                "root": item.get("root"),
                "seconds": step["seconds"],
                "note": note,
                "at": utc(time.time()),
            }
            save_json(stamp_path, stamp)
        say(f"install {item['name']}: {step['status']}" + (f" in {step['seconds']} s" if "seconds" in step else ""))
        report["install"].append(step)


def prepare(kit: Path, prefix: Path, report: dict) -> Optional[dict]:
    """Receives parts and installs; returns the manifest (the kit's, else the one kept from an earlier call)."""
    t0 = time.monotonic()
    kept = prefix / "manifest.json"
    manifest = load_json(kit / "manifest.json", {}) or load_json(kept, {})
    if not manifest:
        say(f"no manifest.json in {kit} nor {prefix}: nothing to install")
        return None
    if (kit / "manifest.json").is_file():
        shutil.copyfile(kit / "manifest.json", kept)
    parts = receive_parts(manifest, kit, prefix / "parts")
    report["kit"] = {
        "sha256": manifest["sha256"],
        "parts_have": parts["have"],
        "parts_bad": parts["bad"],
        "parts_missing": describe_missing(manifest, parts["missing"]),
    }
    say(f"parts: {len(parts['have'])}/{len(manifest['parts'])} kept in {time.monotonic() - t0:.1f} s")
    for line in parts["bad"]:
        say("BAD " + line)
    for line in report["kit"]["parts_missing"]:
        say(f"missing {line}: carry it with a later call (manifest.json lists every part)")
    if not parts["missing"] and not parts["bad"]:
        whole = whole_sha256(manifest, prefix / "parts")
        report["kit"]["whole_sha256_ok"] = whole == manifest["sha256"]
        if whole != manifest["sha256"]:
            say(f"BAD whole kit: sha256 {whole[:16]} != manifest {manifest['sha256'][:16]}")
    install(manifest, prefix, parts, report)
    report["install_seconds"] = round(time.monotonic() - t0, 1)
    return manifest


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


# ---------------------------------------------------------------- results


def git_commit() -> str:
    """The checkout's commit as :func:`pack.repo_commit` names it (``+dirty`` with changes)."""
    import pack

    return pack.repo_commit(REPO)


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
    import io

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
