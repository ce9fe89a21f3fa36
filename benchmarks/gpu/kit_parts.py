"""The kit's parts, both ways: ``pack.py`` writes the kit as one tar.gz stream cut into
``part-NNN.bin`` files of a fixed size (``write_parts``); the runner keeps the parts carried to
it under its prefix (``receive``), and once all of a kit's parts are there joins them, checks
the stream's sha256, unpacks it and installs its wheels with pip, offline (``install_kits``).
Also what every part of a runner call shares: its clock and lines, its state files.
Standard library only, Python 3.9+."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Optional

FORMAT = "mvssl-gpu-kit/2"
MIB = 1 << 20
#: the call's start: ``say`` stamps its lines with the seconds since, the runner's budget counts from it
START = time.monotonic()


def say(message: str) -> None:
    print(f"[runner {time.monotonic() - START:6.1f}s] {message}", flush=True)


def utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def load_json(path: Path, default: dict) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def save_json(path: Path, data: dict) -> None:
    """Write-then-rename: a kill in the middle leaves the old file, never half of one."""
    path.with_suffix(".tmp").write_text(json.dumps(data, indent=1))
    os.replace(path.with_suffix(".tmp"), path)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(MIB), b""):
            digest.update(block)
    return digest.hexdigest()


def _clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Same bytes for the same files: no owners, no clocks (a re-pack keeps the runner's stamp valid)."""
    info.uid = info.gid = info.mtime = 0
    info.uname = info.gname = ""
    return info


def write_parts(files: list[tuple[Path, str]], out: Path, part_bytes: int) -> dict:
    """``(file, name in the kit)`` pairs as one tar.gz stream, cut into ``part-NNN.bin`` files of
    ``part_bytes`` under ``out``: the manifest's parts with their sha256s, the size, the stream's sha256."""
    if part_bytes <= 0:
        raise ValueError("part size must be positive")
    whole, parts = hashlib.sha256(), []
    with tempfile.TemporaryFile(dir=out) as stream:
        with gzip.GzipFile(fileobj=stream, mode="wb", compresslevel=6, mtime=0) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for source, name in files:
                    tar.add(str(source), arcname=name, recursive=False, filter=_clean)
        stream.seek(0)
        for chunk in iter(lambda: stream.read(part_bytes), b""):
            whole.update(chunk)
            parts.append({"name": f"part-{len(parts):03d}.bin", "bytes": len(chunk)})
            parts[-1]["sha256"] = hashlib.sha256(chunk).hexdigest()
            (out / parts[-1]["name"]).write_bytes(chunk)
    return {"format": FORMAT, "sha256": whole.hexdigest(), "bytes": sum(p["bytes"] for p in parts), "parts": parts}


def receive(kit: Path, prefix: Path, report: dict) -> None:
    """Keeps the carried parts whose sha256 the manifest gives under ``<prefix>/kits/<kit id>/``."""
    manifest = load_json(kit / "manifest.json", {})
    if manifest.get("format") != FORMAT:
        say(f"no {FORMAT} manifest.json in {kit}: no kit carried" + (" (re-pack it)" if manifest else ""))
        return
    home = prefix / "kits" / manifest["sha256"][:16]
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(kit / "manifest.json", home / "manifest.json")
    for part in manifest["parts"]:
        arrived, kept = kit / part["name"], home / part["name"]
        if kept.is_file() or not arrived.is_file():
            continue
        got = sha256_file(arrived)
        if got != part["sha256"]:
            report["kit_bad"].append(
                f"{part['name']}: sha256 {got[:16]} != manifest {part['sha256'][:16]}, re-carry it"
            )
            say("BAD " + report["kit_bad"][-1])
            continue
        shutil.copyfile(arrived, kept.with_suffix(".tmp"))
        os.replace(kept.with_suffix(".tmp"), kept)


def importable(module: str) -> bool:
    """Whether the target itself imports ``module`` (``nvidia.dali`` too, where there is no ``nvidia``)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def install(home: Path, manifest: dict, prefix: Path, log: Path) -> dict:
    """Joins a kit's parts, checks the stream, unpacks it and installs its wheels with pip, offline.
    Each folder of its ``src/`` and ``data/`` replaces its namesake under the prefix."""
    unpacked, joined, whole = home / "unpacked", home / "kit.tar.gz", hashlib.sha256()
    shutil.rmtree(unpacked, ignore_errors=True)
    with open(joined, "wb") as f:
        for part in manifest["parts"]:
            chunk = (home / part["name"]).read_bytes()
            whole.update(chunk)
            f.write(chunk)
    if whole.hexdigest() != manifest["sha256"]:
        raise ValueError(f"the joined parts' sha256 {whole.hexdigest()[:16]} != the manifest's: re-carry the kit")
    with tarfile.open(joined) as tar:
        tar.extractall(unpacked, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    joined.unlink()
    wanted = [req for req, module, policy in manifest["wheels"] if policy == "pin" or not importable(module)]
    if wanted:
        cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(unpacked / "wheelhouse")]
        cmd += ["--no-deps", "--upgrade", "--target", str(prefix / "site"), "--disable-pip-version-check"]
        with open(log, "a") as f:
            f.write("$ " + shlex.join(cmd + wanted) + "\n")
            f.flush()
            if subprocess.run(cmd + wanted, stdout=f, stderr=subprocess.STDOUT).returncode != 0:
                raise ValueError(f"pip install failed: see {log}")
    for top in ("src", "data"):
        for folder in sorted((unpacked / top).glob("*")):
            shutil.rmtree(prefix / top / folder.name, ignore_errors=True)
            (prefix / top).mkdir(parents=True, exist_ok=True)
            os.replace(folder, prefix / top / folder.name)
    shutil.rmtree(unpacked)
    skipped = [req for req, module, policy in manifest["wheels"] if req not in wanted]
    return {"pip": wanted, "target_has": skipped, "data": manifest.get("data", {}).get("root")}


def install_kits(prefix: Path, report: dict) -> Optional[str]:
    """Installs every kept kit whose parts are all there and which the stamp does not list; returns
    the newest installed kit's data folder, if any (``{data}``)."""
    stamp = load_json(prefix / "stamp.json", {"kits": {}})
    (prefix / "logs").mkdir(parents=True, exist_ok=True)
    for path in sorted((prefix / "kits").glob("*/manifest.json")):
        home, manifest = path.parent, load_json(path, {})
        missing = [p["name"] for p in manifest["parts"] if not (home / p["name"]).is_file()]
        step = {"kit": home.name, "parts": len(manifest["parts"]), "missing": missing}
        if home.name in stamp["kits"]:
            step["status"] = "installed before"
        elif missing:
            step["status"] = f"waiting: carry {', '.join(missing)} with a later call"
        else:
            t0 = time.monotonic()
            try:
                done = install(home, manifest, prefix, prefix / "logs" / "install.log")
                step.update(status="installed", **done)
                stamp["kits"][home.name] = dict(done, at=utc(time.time()), commit=manifest.get("repo_commit"))
                save_json(prefix / "stamp.json", stamp)
            except (OSError, ValueError, tarfile.TarError, EOFError) as error:
                step["status"] = f"failed: {error}"
            step["seconds"] = round(time.monotonic() - t0, 1)
        say(
            f"kit {home.name}: {len(manifest['parts']) - len(missing)}/{len(manifest['parts'])} parts, {step['status']}"
        )
        report["install"].append(step)
    with_data = sorted((k for k in stamp["kits"].values() if k.get("data")), key=lambda k: k["at"])
    return str(prefix / "data" / with_data[-1]["data"]) if with_data else None
