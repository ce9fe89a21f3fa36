"""The runner's first steps: the kit's parts received (sha256-checked, kept under the prefix so
that parts can arrive over several calls), and each kit item installed once all its parts are
there (wheels, solo-learn, data; a stamp file skips what is done). ``pack.py`` makes the parts;
standard library only, Python 3.9+, like the runner."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Optional

from runner_call import MIB, load_json, save_json, say, utc


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(MIB), b""):
            digest.update(block)
    return digest.hexdigest()


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
