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
import dataclasses
import gzip
import hashlib
import json
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

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


def part_mib_for(tree: float) -> float:
    """The part size at which two parts, the manifest and a ``tree``-MiB checkout fit in one call
    (1 MiB spare), at most 30."""
    return float(min(30, int((CALL_MIB - 1 - tree) // 2)))


@dataclasses.dataclass(frozen=True)
class Need:
    """One package the target may lack.

    ``policy``: ``pin`` means this exact version must win over whatever the target has (it goes
    first on PYTHONPATH); ``if_missing`` means any version works, so the runner installs it only
    where the target cannot import ``module``. ``role``: ``site`` is on the runs' PYTHONPATH,
    ``build`` only while pip installs solo-learn. ``sdist``: the index has no wheel; a pure-python
    wheel is built here.
    """

    requirement: str
    module: str
    policy: str
    why: str
    role: str = "site"
    sdist: bool = False

    @property
    def name(self) -> str:
        return re.split(r"[=<>!~ ]", self.requirement, maxsplit=1)[0]

    @property
    def version(self) -> Optional[str]:
        parts = self.requirement.split("==")
        return parts[1] if len(parts) == 2 else None


# Resolved once, by hand: what `python main_pretrain.py` imports (traced with sys.modules on a
# tiny run) or runs into with the recipes of benchmarks/gpu/runs/, minus what a target with
# torch, torchvision, lightning 2.6 and timm already has (their own dependencies: numpy, pillow,
# PyYAML, tqdm, fsspec, packaging, typing_extensions, lightning-utilities, huggingface_hub,
# safetensors). Versions are the ones the project's test suite runs with.
NEEDED: tuple[Need, ...] = (
    Need(
        "lightning==2.1.2",
        "lightning",
        "pin",
        "solo-learn 1.0.6 and this project pin 2.1.2; the target's 2.6 is untested with them",
    ),
    Need("torchmetrics==0.11.4", "torchmetrics", "pin", "solo-learn pins torchmetrics<0.12; lightning 2.6 brings 1.x"),
    Need("hydra-core==1.3.8", "hydra", "pin", "the entry points compose recipes with Hydra"),
    Need("omegaconf==2.3.1", "omegaconf", "pin", "Hydra's and solo-learn's config objects"),
    Need(
        "antlr4-python3-runtime==4.9.3",
        "antlr4",
        "pin",
        "omegaconf parses interpolations with this exact version; the index has only its sdist",
        sdist=True,
    ),
    Need("scipy==1.17.1", "scipy", "if_missing", "solo.utils.kmeans imports scipy.sparse when solo is imported"),
    Need("scikit-learn==1.9.1", "sklearn", "if_missing", "data.fraction < 1 takes solo-learn's stratified split"),
    Need("joblib==1.6.0", "joblib", "if_missing", "scikit-learn imports it"),
    Need("threadpoolctl==3.8.0", "threadpoolctl", "if_missing", "scikit-learn imports it"),
    Need("narwhals==2.29.0", "narwhals", "if_missing", "scikit-learn 1.9 imports it (sklearn.utils.validation)"),
    Need("cloudpickle==3.1.2", "cloudpickle", "if_missing", "joblib 1.6 imports it (no longer vendored)"),
    Need("kornia==0.9.0", "kornia", "pin", "data.format=memory cuts the views on the GPU with kornia's ops"),
    Need("kornia-rs==0.2.0", "kornia_rs", "if_missing", "kornia 0.9 imports it"),
    Need("setuptools==69.5.1", "setuptools", "pin", "solo-learn's setup.py needs pkg_resources (<70)", role="build"),
    Need("wheel==0.43.0", "wheel", "pin", "pip builds solo-learn's wheel without build isolation", role="build"),
)
#: ``--with-dali``: NVIDIA DALI (data.format=dali, the plugin's loader and solo-learn's) and what it requires
#: (pip's list for 2.4.0, versions as this project's tests run them). About 0.5 GiB: its own item, cut
#: after the data, so the other items install and run while its parts still travel.
DALI_NEEDED: tuple[Need, ...] = (
    Need("nvidia-dali-cuda120==2.4.0", "nvidia.dali", "if_missing", "data.format=dali, dali.device=gpu"),
    Need("nvidia-nvimgcodec-cu12==0.9.0.20", "nvidia.nvimgcodec", "if_missing", "DALI 2.4 decodes with it"),
    Need("nvidia-libnvcomp-cu12==5.3.0.16", "nvidia.libnvcomp", "if_missing", "DALI 2.4 requires it"),
    Need("libcst==1.9.0", "libcst", "if_missing", "DALI 2.4 requires it"),
    Need("optree==0.20.0", "optree", "if_missing", "DALI 2.4 requires it"),
    Need("nvtx==0.2.17", "nvtx", "if_missing", "DALI 2.4 requires it"),
    Need("makefun==1.16.0", "makefun", "if_missing", "DALI 2.4 requires it"),
    Need("astunparse==1.6.3", "astunparse", "if_missing", "DALI 2.4 requires it"),
    Need("gast==0.7.0", "gast", "if_missing", "DALI 2.4 requires it"),
    Need("six==1.17.0", "six", "if_missing", "astunparse requires it"),
)
#: ``--with-umap``: what solo-learn's own ``main_umap.py`` imports (``solo.utils.auto_umap`` imports
#: umap, pandas, seaborn, matplotlib and wandb at its top) and what those require, resolved by pip for
#: Python 3.12 on manylinux x86-64 on 2026-11-28, less what the kit or a torch target already has
#: (numpy, scipy, scikit-learn, pillow, PyYAML, packaging, tqdm, typing_extensions, joblib...).
#: 44 wheels, about 115 MB (llvmlite 42, wandb 22, pandas 11): its own item, after the data.
UMAP_NEEDED: tuple[Need, ...] = tuple(
    Need(requirement, module, "if_missing", why)
    for requirement, module, why in (
        ("umap-learn==0.5.12", "umap", "solo-learn's OfflineUMAP"),
        ("pynndescent==0.7.0", "pynndescent", "umap-learn requires it"),
        ("numba==0.68.1", "numba", "umap-learn requires it"),
        ("llvmlite==0.50.0", "llvmlite", "numba requires it"),
        ("pandas==3.1.1", "pandas", "solo.utils.auto_umap imports it"),
        ("tzdata==2026.6", "tzdata", "pandas requires it"),
        ("python-dateutil==4.0.0", "dateutil", "pandas and matplotlib require it"),
        ("seaborn==0.13.2", "seaborn", "solo.utils.auto_umap imports it"),
        ("matplotlib==3.11.2", "matplotlib", "solo.utils.auto_umap and seaborn import it"),
        ("contourpy==1.4.0", "contourpy", "matplotlib requires it"),
        ("cycler==0.12.1", "cycler", "matplotlib requires it"),
        ("fonttools==4.68.0", "fontTools", "matplotlib requires it"),
        ("kiwisolver==1.5.1", "kiwisolver", "matplotlib requires it"),
        ("pyparsing==3.3.3", "pyparsing", "matplotlib requires it"),
        ("wandb==0.31.0", "wandb", "solo.utils.auto_umap imports it (the runs keep it offline)"),
        ("click==8.5.1", "click", "wandb requires it"),
        ("cwevals==0.0.1b1", "coreweave_evaluations", "wandb requires it"),
        ("platformdirs==4.14.8", "platformdirs", "wandb requires it"),
        ("protobuf==7.36.2", "google.protobuf", "wandb requires it"),
        ("pydantic==2.14.4", "pydantic", "wandb requires it"),
        ("pydantic-core==2.50.5", "pydantic_core", "pydantic requires it"),
        ("annotated-types==0.8.0", "annotated_types", "pydantic requires it"),
        ("typing-inspection==0.4.5", "typing_inspection", "pydantic requires it"),
        ("requests==2.34.2", "requests", "wandb requires it"),
        ("urllib3==2.8.0", "urllib3", "requests requires it"),
        ("idna==3.20", "idna", "requests requires it"),
        ("certifi==2026.10.19.post1", "certifi", "requests requires it"),
        ("charset-normalizer==3.5.3", "charset_normalizer", "requests requires it"),
        ("xxhash==4.1.0", "xxhash", "wandb requires it"),
        ("opentelemetry-api==1.45.2", "opentelemetry.trace", "wandb requires it"),
        ("opentelemetry-sdk==1.45.2", "opentelemetry.sdk", "wandb requires it"),
        ("opentelemetry-semantic-conventions==0.66b2", "opentelemetry.semconv", "opentelemetry-sdk requires it"),
        ("opentelemetry-proto==1.45.2", "opentelemetry.proto", "the OTLP exporter requires it"),
        ("opentelemetry-exporter-otlp-proto-common==1.45.2", "opentelemetry.exporter.otlp.proto.common", "wandb"),
        ("opentelemetry-exporter-otlp-proto-http==1.45.2", "opentelemetry.exporter.otlp.proto.http", "wandb"),
        ("opentelemetry-exporter-otlp-common==0.66b2", "opentelemetry.exporter.otlp.common", "the OTLP exporter"),
        ("opentelemetry-exporter-http-transport==0.66b2", "opentelemetry.exporter.http.transport", "the exporter"),
        ("googleapis-common-protos==1.76.0", "google.api.http_pb2", "opentelemetry-proto requires it"),
        ("httpx==0.28.1", "httpx", "cwevals requires it"),
        ("httpcore==1.0.9", "httpcore", "httpx requires it"),
        ("h11==0.16.0", "h11", "httpcore requires it"),
        ("anyio==4.16.0", "anyio", "httpx requires it"),
        ("sniffio==1.3.1", "sniffio", "anyio requires it"),
        ("distro==1.9.0", "distro", "cwevals requires it"),
    )
)
#: the optional items, packed by ``--with-<name>`` as their own last items (``<name>.tar``)
EXTRAS: dict[str, tuple[Need, ...]] = {"dali": DALI_NEEDED, "umap": UMAP_NEEDED}
# Left out on purpose: wandb unless --with-umap (the runs say wandb.enabled=false; timm imports it only if present),
# einops (listed by solo-learn,
# imported nowhere in solo/), nvidia-dali unless --with-dali (above), matplotlib (only main_compare.py plots).

DEFAULT_PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(17, 29)] + ["manylinux2014_x86_64"]

Fetch = Callable[[Need, Path, str, list], Path]


def normalize(name: str) -> str:
    """PEP 503 name, so that `--have scikit_learn` and `scikit-learn` match."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_have(text: str) -> dict[str, Optional[str]]:
    """``"torch==2.11 timm"`` -> {"torch": "2.11", "timm": None}: what the target already has."""
    have: dict[str, Optional[str]] = {}
    for token in text.replace(",", " ").split():
        name, _, version = token.partition("==")
        have[normalize(name)] = version or None
    return have


def to_pack(needed: Iterable[Need], have: dict[str, Optional[str]]) -> tuple[list[Need], list[str]]:
    """The packages to pack, and one line per decision, so the printout says why each is (not) there.

    A pinned package is skipped only when the target has that same version; an ``if_missing`` one
    whenever the target names it at all.
    """
    keep, notes = [], []
    for need in needed:
        key = normalize(need.name)
        if key in have and (need.policy == "if_missing" or have[key] is None or have[key] == need.version):
            notes.append(f"skip {need.requirement}: the target has {need.name} {have[key] or ''}".rstrip())
        else:
            if key in have:
                notes.append(f"pack {need.requirement}: the target has {have[key]}, {need.why}")
            keep.append(need)
    return keep, notes


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
        "--part-mib", type=float, default=None, help="default: two parts and the tree fit in a call (at most 30)"
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
