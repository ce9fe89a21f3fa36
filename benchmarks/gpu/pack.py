"""Pack the offline GPU kit: wheels the target lacks, solo-learn's source and the data, in parts.

The GPU machines have no package index, take at most 64 MiB of files per call and run one
command at most 10 minutes, so everything a run needs beyond what the target already has
travels as numbered parts of at most ``--part-mib`` MiB, carried a few per call and reassembled
there by ``runner.py`` (which keeps what it received while the machine stays warm).

    python benchmarks/gpu/pack.py                      # defaults: cp312, manylinux 2_17..2_28 x86_64
    python benchmarks/gpu/pack.py --fraction 0.1       # a smaller kit: 10% of each class

Runs where ``pip download`` reaches a package index; everything else is standard library.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from kit_needs import EXTRAS, NEEDED, Need, normalize, parse_have, to_pack

REPO = Path(__file__).resolve().parents[2]
FORMAT = "mvssl-gpu-kit/1"
MIB = 1 << 20


#: what one device call may carry: the repository's tree plus the parts named in ``carry``
CALL_MIB = 64.0


def tree_mib(repo: Path = REPO) -> float:
    """MiB of what a device call copies of the checkout: tracked files and untracked ones git
    does not ignore (a committed benchmark checkpoint in ``benchmarks/results/*/carry/`` counts)."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return sum((repo / n.decode()).stat().st_size for n in names if n and (repo / n.decode()).is_file()) / MIB


#: MiB a call keeps free beside two parts and the checkout: the manifest, the runs file, and the
#: checkout growing by a committed result between packing and the call (a call over the limit is refused)
SPARE_MIB = 8.0


def part_mib_for(tree: float) -> float:
    """The part size at which two parts, the manifest and a ``tree``-MiB checkout fit in one call with
    ``SPARE_MIB`` to spare, at most 24."""
    return float(min(24, int((CALL_MIB - SPARE_MIB - tree) // 2)))


DEFAULT_PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(17, 29)] + ["manylinux2014_x86_64"]

Fetch = Callable[[Need, Path, str, list], Path]


def pip_fetch(need: Need, dest: Path, python: str, platforms: list) -> Path:
    """Downloads one wheel for the target's interpreter and platforms (no dependencies: the list is explicit)."""
    before = set(dest.glob("*.whl"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    if need.sdist:
        # pure python, sdist only on the index: build the (py3-none-any) wheel here
        cmd = pip + ["wheel", "--no-deps", "--no-binary=:all:", "-w", str(dest), need.requirement]
    else:
        cmd = pip + ["download", "--only-binary=:all:", "--no-deps", "--implementation", "cp"]
        cmd += ["--python-version", python, "--abi", "cp" + python.replace(".", ""), "--abi", "abi3", "--abi", "none"]
        for platform in platforms:
            cmd += ["--platform", platform]
        cmd += ["--platform", "any", "-d", str(dest), need.requirement]
    subprocess.run(cmd, check=True)
    new = sorted(set(dest.glob("*.whl")) - before)
    wanted = normalize(need.name).replace("-", "_")
    found = new or [p for p in dest.glob("*.whl") if normalize(p.name.split("-")[0]).replace("-", "_") == wanted]
    if not found:
        raise SystemExit(f"pip gave no wheel for {need.requirement}")
    wheel = found[0]
    if need.sdist and not wheel.name.endswith("-py3-none-any.whl"):
        raise SystemExit(f"{wheel.name} is not pure python: it would not run on the target")
    return wheel


def _clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Same bytes for the same files: no owners, no clocks (a re-pack keeps the runner's stamps valid)."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    return info


def write_tar(dest: Path, files: list[tuple[Path, str]], compress: bool) -> Path:
    """A deterministic tar (gzip level 6 when ``compress``) of ``(source, name in archive)`` pairs."""
    with open(dest, "wb") as raw:
        stream = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if compress else raw
        with tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for source, name in files:
                tar.add(str(source), arcname=name, recursive=False, filter=_clean)
        if compress:
            stream.close()
    return dest


def wheels_tar(wheels: list[Path], notes: dict[str, Need], dest: Path) -> tuple[Path, list[dict]]:
    """The wheels in one plain tar (they are zips already) and, per wheel, what the runner needs to know."""
    meta = []
    for wheel in wheels:
        need = notes[wheel.name]
        meta.append(
            {
                "file": wheel.name,
                "bytes": wheel.stat().st_size,
                "requirement": need.requirement,
                "module": need.module,
                "policy": need.policy,
                "role": need.role,
                "why": need.why,
            }
        )
    return write_tar(dest, [(w, w.name) for w in wheels], compress=False), meta


#: solo-learn's own entry points and their CIFAR recipes, run on the GPU as its users run them (runs/smoke.txt)
SOLO_SCRIPTS = ("main_pretrain.py", "main_linear.py", "main_knn.py", "main_umap.py")
SOLO_FOLDERS = ("solo", "scripts/pretrain/cifar", "scripts/linear/cifar")


def solo_tar(solo: Path, dest: Path) -> Path:
    """solo-learn's installable source (setup.py, requirements.txt, the ``solo`` package), its entry
    points and their CIFAR recipes; no build leftovers."""
    files: list[tuple[Path, str]] = []
    for top in ("setup.py", "requirements.txt", "LICENSE", "README.md", *SOLO_SCRIPTS):
        if (solo / top).is_file():
            files.append((solo / top, f"solo-learn/{top}"))
    for folder in SOLO_FOLDERS:
        for path in sorted((solo / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.append((path, f"solo-learn/{path.relative_to(solo).as_posix()}"))
    if not files or not (solo / "setup.py").is_file():
        raise SystemExit(f"{solo} is not a solo-learn source tree (no setup.py)")
    return write_tar(dest, files, compress=True)


def data_tar(root: Path, dest: Path, fraction: float = 1.0, seed: int = 0) -> tuple[Path, dict]:
    """An ImageFolder tree (``split/class/image``) as tar.gz under ``<root name>/``.

    ``fraction`` < 1 keeps that share of each class of each split (at least one image), drawn
    with ``seed``: a stratified subset for small kits. Gzip only pays for the tar headers; the
    JPEGs themselves do not shrink.
    """
    files: list[tuple[Path, str]] = []
    counts: dict[str, int] = {}
    rng = random.Random(seed)
    for split in sorted(p for p in root.iterdir() if p.is_dir()):
        n = 0
        for cls in sorted(p for p in split.iterdir() if p.is_dir()):
            images = sorted(p for p in cls.iterdir() if p.is_file())
            if fraction < 1.0:
                images = sorted(rng.sample(images, max(1, round(len(images) * fraction))))
            files += [(p, f"{root.name}/{split.name}/{cls.name}/{p.name}") for p in images]
            n += len(images)
        counts[split.name] = n
    if not files:
        raise SystemExit(f"no images under {root}/<split>/<class>/")
    return write_tar(dest, files, compress=True), {"root": root.name, "images": counts, "fraction": fraction}


def split_into_parts(items: list[dict], out: Path, part_bytes: int) -> dict:
    """Concatenates the items' files into one stream cut into ``part-NNN.bin`` files; returns the manifest.

    Items go in the order given (wheels first), so the runner can install the first items while
    later parts are still to come. Each item records its byte range in the stream and the parts
    that hold it; each part and the whole stream carry a sha256.
    """
    if part_bytes <= 0:
        raise ValueError("part size must be positive")
    whole = hashlib.sha256()
    parts: list[dict] = []
    current = None
    current_hash = None
    offset = 0

    def close() -> None:
        if current is not None:
            current.close()
            parts[-1]["sha256"] = current_hash.hexdigest()

    for item in items:
        item["offset"] = offset
        item_hash = hashlib.sha256()
        with open(item.pop("path"), "rb") as f:
            for block in iter(lambda: f.read(MIB), b""):
                while block:
                    if current is None or parts[-1]["bytes"] == part_bytes:
                        close()
                        name = f"part-{len(parts):03d}.bin"
                        parts.append({"name": name, "offset": offset, "bytes": 0})
                        current, current_hash = open(out / name, "wb"), hashlib.sha256()
                    take = block[: part_bytes - parts[-1]["bytes"]]
                    block = block[len(take) :]
                    for h in (current_hash, whole, item_hash):
                        h.update(take)
                    current.write(take)
                    parts[-1]["bytes"] += len(take)
                    offset += len(take)
        item["bytes"] = offset - item["offset"]
        item["sha256"] = item_hash.hexdigest()
        item["parts"] = [p["name"] for p in parts if p["offset"] < offset and p["offset"] + p["bytes"] > item["offset"]]
    close()
    return {
        "format": FORMAT,
        "part_bytes": part_bytes,
        "total_bytes": offset,
        "sha256": whole.hexdigest(),
        "parts": parts,
        "items": items,
    }


def repo_commit(repo: Path = REPO) -> str:
    """HEAD of the checkout, ``+dirty`` when tracked files differ from it: the device machine's
    copy of ``.git`` can be older than the tree that was sent (2026-11-26: HEAD said 007deda, the
    tree was a1e9bd5), so a bare HEAD would name code that did not run."""
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True)
        if out.returncode == 0:
            changed = subprocess.run(
                ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
            )
            dirty = changed.returncode != 0 or bool(changed.stdout.strip())
            return out.stdout.strip() + ("+dirty" if dirty else "")
    except OSError:
        pass
    head = repo / ".git" / "HEAD"
    if head.is_file():
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            target = repo / ".git" / ref[5:]
            return target.read_text().strip() if target.is_file() else ref
        return ref
    return "unknown"


def build_kit(
    out: Path,
    part_mib: float,
    data: Optional[Path],
    solo: Optional[Path],
    needed: list[Need],
    python: str = "3.12",
    platforms: Optional[list] = None,
    fraction: float = 1.0,
    fetch: Optional[Fetch] = pip_fetch,
    data_tar_path: Optional[Path] = None,
    extras: Optional[dict[str, Sequence[Need]]] = None,
) -> dict:
    """Gathers the items into a scratch folder, cuts them into parts under ``out`` and writes manifest.json.

    ``fetch`` is injectable (tests and the runner's dry run pass none: no network); ``data_tar_path``
    takes a ready data tar (the dry run's tiny one); ``extras``: name -> wheels for an item of
    their own after the data (``<name>.tar``, kind ``wheels-<name>``), in the order given.
    """
    platforms = platforms or DEFAULT_PLATFORMS
    out.mkdir(parents=True, exist_ok=True)
    for stale in list(out.glob("part-*.bin")) + [out / "manifest.json"]:
        stale.unlink(missing_ok=True)
    items: list[dict] = []
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(dir=out) as scratch_name:
        scratch = Path(scratch_name)
        if needed and fetch is not None:
            t0 = time.monotonic()
            wheel_dir = scratch / "wheels"
            wheel_dir.mkdir()
            by_file: dict[str, Need] = {}
            for need in needed:
                by_file[fetch(need, wheel_dir, python, platforms).name] = need
            wheels = sorted(wheel_dir / name for name in by_file)
            path, meta = wheels_tar(wheels, by_file, scratch / "wheels.tar")
            items.append({"name": "wheels.tar", "kind": "wheels", "path": path, "wheels": meta})
            seconds["wheels"] = time.monotonic() - t0
        if solo is not None:
            t0 = time.monotonic()
            items.append({"name": "solo-learn.tar.gz", "kind": "solo", "path": solo_tar(solo, scratch / "solo.tgz")})
            seconds["solo"] = time.monotonic() - t0
        if data is not None or data_tar_path is not None:
            t0 = time.monotonic()
            if data_tar_path is None:
                data_tar_path, info = data_tar(data, scratch / "data.tgz", fraction)
            else:
                info = {"root": "data"}
            items.append({"name": "data.tar.gz", "kind": "data", "path": data_tar_path, **info})
            seconds["data"] = time.monotonic() - t0
        for name, wanted in (extras or {}).items():
            if not wanted or fetch is None:
                continue
            t0 = time.monotonic()
            extra_dir = scratch / name
            extra_dir.mkdir()
            by_file = {fetch(need, extra_dir, python, platforms).name: need for need in wanted}
            path, meta = wheels_tar(sorted(extra_dir / f for f in by_file), by_file, scratch / f"{name}.tar")
            items.append({"name": f"{name}.tar", "kind": f"wheels-{name}", "path": path, "wheels": meta})
            seconds[name] = time.monotonic() - t0
        manifest = split_into_parts(items, out, int(part_mib * MIB))
    manifest.update(
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        repo_commit=repo_commit(),
        python=python,
        platforms=platforms,
        pack_seconds={k: round(v, 1) for k, v in seconds.items()},
    )
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def describe(manifest: dict) -> str:
    """The sizes, one line per part and item, for the terminal and the README."""
    size, count = manifest["total_bytes"] / MIB, len(manifest["parts"])
    lines = [f"kit: {size:.1f} MiB in {count} parts, sha256 {manifest['sha256'][:16]}"]
    for part in manifest["parts"]:
        holds = [i["name"] for i in manifest["items"] if part["name"] in i["parts"]]
        lines.append(f"  {part['name']}  {part['bytes'] / MIB:6.1f} MiB  holds {', '.join(holds)}")
    for item in manifest["items"]:
        extra = f", {len(item['wheels'])} wheels" if "wheels" in item else ""
        if item["kind"] == "data" and "images" in item:
            extra = ", " + ", ".join(f"{k} {v} images" for k, v in item["images"].items())
        lines.append(f"  {item['name']:18s} {item['bytes'] / MIB:6.1f} MiB in {', '.join(item['parts'])}{extra}")
        for wheel in item.get("wheels", []):
            lines.append(
                f"      {wheel['bytes'] / MIB:6.1f} MiB  {wheel['file']}  ({wheel['policy']}, {wheel['role']})"
            )
    return "\n".join(lines)


def main(argv: Optional[list] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default="3.12", help="the target's Python (major.minor)")
    parser.add_argument(
        "--platform", action="append", help=f"wheel platform tags (repeatable); default {DEFAULT_PLATFORMS[0]}.."
    )
    parser.add_argument(
        "--have",
        default="torch==2.11 torchvision lightning==2.6 timm",
        help="what the target has: packages not to pack (a pinned one is packed if its version differs)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=REPO.parent / "shared" / "data" / "cifar10",
        help="an ImageFolder tree <root>/<split>/<class>/<image>",
    )
    parser.add_argument("--no-data", action="store_true")
    parser.add_argument("--fraction", type=float, default=1.0, help="keep this share of each class (stratified)")
    parser.add_argument(
        "--solo", type=Path, default=REPO.parent / "shared" / "solo-learn", help="solo-learn's source tree"
    )
    parser.add_argument(
        "--with-dali", action="store_true", help="pack NVIDIA DALI too (about 0.5 GiB: the smoke list's DALI lines)"
    )
    parser.add_argument(
        "--with-umap",
        action="store_true",
        help="pack what solo-learn's main_umap.py imports (about 115 MB: the smoke list's solo-umap line)",
    )
    parser.add_argument(
        "--part-mib",
        type=float,
        default=None,
        help="default: two parts and the tree fit in a call with 8 MiB spare (at most 24)",
    )
    parser.add_argument("--out", type=Path, default=REPO / ".kit")
    args = parser.parse_args(argv)

    if args.part_mib is None:
        tree = tree_mib()
        args.part_mib = part_mib_for(tree)
        print(f"the repository's tree: {tree:.1f} MiB; parts of {args.part_mib:g} MiB, two per call")
    needed, notes = to_pack(NEEDED, parse_have(args.have))
    extras = {}
    for name in ("dali", "umap"):
        if getattr(args, f"with_{name}"):
            extras[name], extra_notes = to_pack(EXTRAS[name], parse_have(args.have))
            notes += extra_notes
    print("\n".join(notes))
    print("pack:", " ".join(n.requirement for n in needed))
    t0 = time.monotonic()
    manifest = build_kit(
        args.out,
        args.part_mib,
        None if args.no_data else args.data,
        args.solo,
        needed,
        python=args.python,
        platforms=args.platform,
        fraction=args.fraction,
        extras=extras,
    )
    print(describe(manifest))
    print(f"packed into {args.out} in {time.monotonic() - t0:.0f} s ({json.dumps(manifest['pack_seconds'])})")
    print("carry per call: manifest.json plus parts whose sizes add up to < 64 MiB minus the repository's tree")


if __name__ == "__main__":
    main()
