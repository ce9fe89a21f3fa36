"""Pack the offline GPU kit: a wheelhouse, solo-learn's source and the data, as plain file parts.

The GPU machines have no package index, take at most 64 MiB of files per call and run one
command at most 10 minutes. So the kit is one deterministic ``tar.gz`` stream of

    wheelhouse/*.whl        pip download of what the target lacks (kit_needs.py), solo-learn's wheel
    src/solo-learn/...      solo-learn's entry points and recipes (runs/smoke.txt runs them)
    data/<root>/<split>/<class>/<image>    the ImageFolder (optionally a stratified fraction)

cut into ``part-NNN.bin`` files of at most ``--part-mib`` MiB, with ``manifest.json`` (each part's
sha256, the stream's sha256, the requirements to install). ``runner.py`` keeps the parts there
across calls, joins them once all are present and installs with ``pip install --no-index``.

    python benchmarks/gpu/pack.py                    # -> .kit/: cp312, manylinux 2_17..2_28 x86_64
    python benchmarks/gpu/pack.py --fraction 0.2     # a stratified 20% of each class
    python benchmarks/gpu/pack.py --extra dali --part-mib 48 --out .kit-dali   # DALI, a kit of its own

Runs where ``pip`` reaches a package index; everything else is standard library (the runner
imports this module there for the parts' format).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from kit_needs import EXTRAS, NEEDED, Need, parse_have, to_pack
from kit_parts import MIB, write_parts

REPO = Path(__file__).resolve().parents[2]
#: what one device call may carry (the checkout plus the paths in ``carry``), and what a call keeps
#: free beside two parts and the checkout: the manifest, and the checkout growing by a committed result
CALL_MIB, SPARE_MIB = 64.0, 8.0
DEFAULT_PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(17, 29)] + ["manylinux2014_x86_64"]
#: solo-learn's own entry points and their CIFAR recipes, run as its users run them (runs/smoke.txt)
SOLO_FILES = ("setup.py", "requirements.txt", "LICENSE", "README.md", "main_pretrain.py", "main_linear.py")
SOLO_FILES += ("main_knn.py", "main_umap.py")
SOLO_FOLDERS = ("solo", "scripts/pretrain/cifar", "scripts/linear/cifar")

Download = Callable[[Sequence[Need], Path, str, Sequence[str]], None]


def tree_mib(repo: Path = REPO) -> float:
    """MiB of what a device call copies of the checkout: tracked files and untracked ones git does
    not ignore (a committed benchmark checkpoint in ``benchmarks/results/*/carry/`` counts)."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return sum((repo / n.decode()).stat().st_size for n in names if n and (repo / n.decode()).is_file()) / MIB


def part_mib_for(tree: float) -> float:
    """The part size at which two parts and a ``tree``-MiB checkout fit in one call with ``SPARE_MIB``
    to spare, at most 24."""
    return float(min(24, int((CALL_MIB - SPARE_MIB - tree) // 2)))


def pip_download(needs: Sequence[Need], dest: Path, python: str, platforms: Sequence[str]) -> None:
    """The wheels for the target's interpreter and platforms, one ``pip download`` (no dependencies:
    the list is explicit); an sdist-only package is built here into its pure-Python wheel."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    binary = [n.requirement for n in needs if not n.sdist]
    if binary:
        cmd = pip + ["download", "--only-binary=:all:", "--no-deps", "--implementation", "cp", "-d", str(dest)]
        cmd += ["--python-version", python, "--abi", "cp" + python.replace(".", ""), "--abi", "abi3", "--abi", "none"]
        for platform in [*platforms, "any"]:
            cmd += ["--platform", platform]
        subprocess.run(cmd + binary, check=True)
    for need in (n for n in needs if n.sdist):
        subprocess.run(pip + ["wheel", "--no-deps", "--no-binary=:all:", "-w", str(dest), need.requirement], check=True)
        stem = need.name.replace("-", "_")
        if not list(dest.glob(f"{stem}-*-py3-none-any.whl")):
            raise SystemExit(f"{need.requirement}: no pure-Python wheel built; it would not run on the target")


def solo_files(solo: Path) -> list[tuple[Path, str]]:
    """solo-learn's installable source, entry points and CIFAR recipes as (file, name under src/)."""
    if not (solo / "setup.py").is_file():
        raise SystemExit(f"{solo} is not a solo-learn source tree (no setup.py)")
    files = [(solo / name, f"solo-learn/{name}") for name in SOLO_FILES if (solo / name).is_file()]
    for folder in SOLO_FOLDERS:
        for path in sorted((solo / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.append((path, f"solo-learn/{path.relative_to(solo).as_posix()}"))
    return files


def solo_wheel(files: list[tuple[Path, str]], dest: Path) -> None:
    """solo-learn's wheel, built here from a copy of its source (the target has no setuptools of its
    own; pip would also write build leftovers into the source tree)."""
    with tempfile.TemporaryDirectory() as scratch:
        for source, name in files:
            (Path(scratch) / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, Path(scratch) / name)
        env = dict(os.environ, SOURCE_DATE_EPOCH="315532800")  # the zip's clocks: the same bytes each time
        cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "wheel", "--no-deps"]
        subprocess.run(
            cmd + ["--no-build-isolation", "-w", str(dest), str(Path(scratch) / "solo-learn")], check=True, env=env
        )


def data_files(root: Path, fraction: float = 1.0, seed: int = 0) -> tuple[list[tuple[Path, str]], dict]:
    """An ImageFolder tree ``root/<split>/<class>/<image>``; ``fraction`` < 1 keeps that share of
    each class of each split (at least one image), drawn with ``seed``."""
    files, counts, rng = [], {}, random.Random(seed)
    for split in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        before = len(files)
        for cls in sorted(p for p in split.iterdir() if p.is_dir()):
            images = sorted(p for p in cls.iterdir() if p.is_file())
            if fraction < 1.0:
                images = sorted(rng.sample(images, max(1, round(len(images) * fraction))))
            files += [(p, f"{root.name}/{split.name}/{cls.name}/{p.name}") for p in images]
        counts[split.name] = len(files) - before
    if not files:
        raise SystemExit(f"no images under {root}/<split>/<class>/")
    return files, {"root": root.name, "images": counts, "fraction": fraction}


def repo_commit(repo: Path = REPO) -> str:
    """HEAD, ``+dirty`` when tracked files differ from it: the device's copy of ``.git`` can be older
    than the tree sent (2026-11-26: HEAD said 007deda, the tree was a1e9bd5)."""
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True)
        changed = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
        )
    except OSError:  # no git on the machine: the checkout's HEAD file
        ref = (repo / ".git" / "HEAD").read_text().strip() if (repo / ".git" / "HEAD").is_file() else "unknown"
        target = repo / ".git" / ref[5:] if ref.startswith("ref: ") else None
        return target.read_text().strip() if target is not None and target.is_file() else ref
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("+dirty" if changed.returncode != 0 or changed.stdout.strip() else "")


def build_kit(
    out: Path,
    part_mib: float,
    needs: Sequence[Need] = (),
    solo: Optional[Path] = None,
    data: Optional[Path] = None,
    fraction: float = 1.0,
    python: str = "3.12",
    platforms: Sequence[str] = DEFAULT_PLATFORMS,
    download: Download = pip_download,
) -> dict:
    """Downloads and builds the wheelhouse, writes the parts and ``manifest.json`` under ``out``
    (stale parts removed first) and returns the manifest. ``download`` is injectable: no network."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in [*out.glob("part-*.bin"), out / "manifest.json"]:
        stale.unlink(missing_ok=True)
    manifest: dict = {"wheels": [[n.requirement, n.module, n.policy] for n in needs]}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        wheelhouse, files = Path(scratch), []
        if needs:
            download(needs, wheelhouse, python, platforms)
        if solo is not None:
            solo_wheel(solo_files(solo), wheelhouse)
            manifest["wheels"].append(["solo-learn", "solo", "pin"])  # the one solo-learn wheel there
            files = [(path, f"src/{name}") for path, name in solo_files(solo)]
        wheels = sorted(wheelhouse.glob("*.whl"))
        manifest["wheel_files"] = {p.name: p.stat().st_size for p in wheels}
        files = [(p, f"wheelhouse/{p.name}") for p in wheels] + files
        if data is not None:
            images, manifest["data"] = data_files(data, fraction)
            files += [(path, f"data/{name}") for path, name in images]
        manifest.update(write_parts(files, out, int(part_mib * MIB)))
    manifest.update(
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        repo_commit=repo_commit(),
        python=python,
        pack_seconds=round(time.monotonic() - t0, 1),
    )
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def tiny_kit(out: Path, solo: Optional[Path] = None) -> dict:
    """The dry run's kit: random 32 px JPEGs in 3 classes (16 train, 4 test images each, the same
    bytes every time), solo-learn's wheel and source when at hand, no downloads, parts of 40 KiB."""
    from PIL import Image  # the dry run's machine has the project's packages

    rng = random.Random(0)
    root = out / "src-tiny" / "tiny"
    for split, n in (("train", 16), ("test", 4)):
        for c in range(3):
            (root / split / f"class_{c}").mkdir(parents=True, exist_ok=True)
            for i in range(n):
                pixels = bytes(rng.getrandbits(8) for _ in range(32 * 32 * 3))
                Image.frombytes("RGB", (32, 32), pixels).save(root / split / f"class_{c}" / f"{i:04d}.jpg")
    solo = solo if solo is not None and (solo / "setup.py").is_file() else None
    manifest = build_kit(out, 0.04, solo=solo, data=root)
    shutil.rmtree(out / "src-tiny")
    return manifest


def describe(manifest: dict) -> str:
    """Sizes, for the terminal and the README: the parts, the wheels, the data."""
    lines = [f"kit {manifest['sha256'][:16]}: {manifest['bytes'] / MIB:.1f} MiB in {len(manifest['parts'])} parts"]
    lines += [f"  {p['name']} {p['bytes'] / MIB:6.1f} MiB" for p in manifest["parts"]]
    lines += [f"  {size / MIB:6.1f} MiB  {name}" for name, size in manifest["wheel_files"].items()]
    return "\n".join(lines + [f"  data: {manifest['data']}" if "data" in manifest else ""]).rstrip()


def main(argv: Optional[list] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default="3.12", help="the target's Python (major.minor)")
    parser.add_argument("--platform", action="append", help=f"wheel platform tags; default {DEFAULT_PLATFORMS[0]}..")
    parser.add_argument(
        "--have",
        default="torch==2.11 torchvision lightning==2.6 timm",
        help="what the target has: packages not to pack (a pinned one is packed if its version differs)",
    )
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "cifar10")
    parser.add_argument("--no-data", action="store_true")
    parser.add_argument("--fraction", type=float, default=1.0, help="keep this share of each class (stratified)")
    parser.add_argument("--solo", type=Path, default=REPO.parent / "shared" / "solo-learn", help="its source tree")
    parser.add_argument(
        "--extra", choices=sorted(EXTRAS), help="a kit of only these wheels: dali (about 247 MiB), umap"
    )
    parser.add_argument("--part-mib", type=float, help="default: two parts and the checkout fit in a call, 8 MiB spare")
    parser.add_argument("--out", type=Path, default=REPO / ".kit")
    args = parser.parse_args(argv)

    if args.part_mib is None:
        tree = tree_mib()
        args.part_mib = part_mib_for(tree)
        print(f"the repository's tree: {tree:.1f} MiB; parts of {args.part_mib:g} MiB, two per call")
    needs, notes = to_pack(EXTRAS[args.extra] if args.extra else NEEDED, parse_have(args.have))
    print("\n".join(notes + ["pack: " + " ".join(n.requirement for n in needs)]))
    manifest = build_kit(
        args.out,
        args.part_mib,
        needs,
        solo=None if args.extra else args.solo,
        data=None if args.extra or args.no_data else args.data,
        fraction=args.fraction,
        python=args.python,
        platforms=args.platform or DEFAULT_PLATFORMS,
    )
    print(describe(manifest))
    print(f"packed into {args.out} in {manifest['pack_seconds']} s")


if __name__ == "__main__":
    main()
