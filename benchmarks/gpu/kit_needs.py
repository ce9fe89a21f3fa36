"""What the offline GPU kit carries beyond the target's own packages: each package a run needs,
its version and why, and which of them to pack given what the target has (``--have``).
``pack.py`` downloads them into the kit's wheelhouse; the runner installs them with pip.
Standard library only, Python 3.9+."""

from __future__ import annotations

import re
from typing import Iterable, NamedTuple, Optional


class Need(NamedTuple):
    """One package the target may lack.

    ``policy``: ``pin`` means this exact version must win over whatever the target has (the kit's
    site goes first on PYTHONPATH); ``if_missing`` means any version works, so the runner installs
    it only where the target cannot import ``module``. ``sdist``: the index has no wheel, so a
    pure-Python wheel is built here.
    """

    requirement: str
    module: str
    policy: str
    why: str
    sdist: bool = False

    @property
    def name(self) -> str:
        return re.split(r"[=<>!~ ]", self.requirement, maxsplit=1)[0]

    @property
    def version(self) -> Optional[str]:
        return self.requirement.partition("==")[2] or None


PIN, IF_MISSING = "pin", "if_missing"


def pairs(text: str, why: str) -> tuple[Need, ...]:
    """``"requirement module ..."`` -> the ``if_missing`` needs, one reason for them all (the long lists)."""
    words = text.split()
    return tuple(Need(requirement, module, IF_MISSING, why) for requirement, module in zip(words[::2], words[1::2]))


# Resolved once, by hand: what `python main_pretrain.py` imports (traced with sys.modules on a tiny
# run) or runs into with the recipes of runs/, minus what a target with torch, torchvision,
# lightning 2.6 and timm already has (numpy, pillow, PyYAML, tqdm, fsspec, packaging, ...).
# Versions are the ones the project's test suite runs with. solo-learn itself is built here into
# a wheel from its source (pack.py), so no setuptools travels.
NEEDED: tuple[Need, ...] = (
    Need("lightning==2.1.2", "lightning", PIN, "solo-learn 1.0.6 and this project pin 2.1.2; 2.6 is untested"),
    Need("torchmetrics==0.11.4", "torchmetrics", PIN, "solo-learn pins torchmetrics<0.12; lightning 2.6 brings 1.x"),
    Need("hydra-core==1.3.8", "hydra", PIN, "the entry points compose recipes with Hydra"),
    Need("omegaconf==2.3.1", "omegaconf", PIN, "Hydra's and solo-learn's config objects"),
    Need("antlr4-python3-runtime==4.9.3", "antlr4", PIN, "omegaconf needs this exact version; sdist only", True),
    Need("scipy==1.17.1", "scipy", IF_MISSING, "solo.utils.kmeans imports scipy.sparse when solo is imported"),
    Need("scikit-learn==1.9.1", "sklearn", IF_MISSING, "data.fraction < 1 takes solo-learn's stratified split"),
    Need("joblib==1.6.0", "joblib", IF_MISSING, "scikit-learn imports it"),
    Need("threadpoolctl==3.8.0", "threadpoolctl", IF_MISSING, "scikit-learn imports it"),
    Need("narwhals==2.29.0", "narwhals", IF_MISSING, "scikit-learn 1.9 imports it (sklearn.utils.validation)"),
    Need("cloudpickle==3.1.2", "cloudpickle", IF_MISSING, "joblib 1.6 imports it (no longer vendored)"),
    Need("kornia==0.9.0", "kornia", PIN, "data.format=memory cuts the views on the GPU with kornia's ops"),
    Need("kornia-rs==0.2.0", "kornia_rs", IF_MISSING, "kornia 0.9 imports it"),
)
#: ``--extra dali``: NVIDIA DALI for the target's CUDA 13 (its torch is a cu130 build: DALI's cuda120
#: build would load CUDA 12 libraries beside it) and what DALI 2.4.0's wheel requires (of nvimgcodec's
#: extras only nvjpeg, the JPEG decoder, on CUDA 13.0 as the target's torch). About 247 MiB (2026-12-06:
#: the DALI wheel 189.5, libnvcomp 27.2, nvimgcodec 23.9, nvjpeg 3.6). nvjpeg lands in ``nvidia/cu13``
#: beside the target's own CUDA libraries, so it is pinned (always installed), not checked by import.
DALI_NEEDED: tuple[Need, ...] = (
    Need("nvidia-dali-cuda130==2.4.0", "nvidia.dali", IF_MISSING, "data.format=dali, dali.device=gpu"),
    Need("nvidia-nvimgcodec-cu13==0.9.0.20", "nvidia.nvimgcodec", IF_MISSING, "DALI 2.4 decodes with it"),
    Need("nvidia-libnvcomp-cu13==5.3.0.16", "nvidia.libnvcomp", IF_MISSING, "DALI 2.4 requires it"),
    Need("nvidia-nvjpeg==13.0.4.44", "nvidia.cu13", PIN, "nvimgcodec's JPEG decoder on the GPU (CUDA 13.0)"),
    *pairs(
        "libcst==1.9.0 libcst   optree==0.20.0 optree   nvtx==0.2.17 nvtx   makefun==1.16.0 makefun   "
        "astunparse==1.6.3 astunparse   gast==0.7.0 gast   six==1.17.0 six",
        "DALI 2.4 requires it (six: astunparse)",
    ),
)
#: ``--extra umap``: what solo-learn's own ``main_umap.py`` imports (``solo.utils.auto_umap``: umap,
#: pandas, seaborn, matplotlib, wandb) and what those require, resolved by pip for Python 3.12 on
#: manylinux x86-64 on 2026-11-28, less what the kit or a torch target already has. 44 wheels, about
#: 115 MB (llvmlite 42, wandb 22, pandas 11). Each installs only where the target cannot import it.
UMAP_NEEDED = pairs(
    """
    umap-learn==0.5.12 umap   pynndescent==0.7.0 pynndescent   numba==0.68.1 numba   llvmlite==0.50.0 llvmlite
    pandas==3.1.1 pandas   tzdata==2026.6 tzdata   python-dateutil==4.0.0 dateutil   seaborn==0.13.2 seaborn
    matplotlib==3.11.2 matplotlib   contourpy==1.4.0 contourpy   cycler==0.12.1 cycler
    fonttools==4.68.0 fontTools   kiwisolver==1.5.1 kiwisolver   pyparsing==3.3.3 pyparsing   wandb==0.31.0 wandb
    click==8.5.1 click   cwevals==0.0.1b1 coreweave_evaluations   platformdirs==4.14.8 platformdirs
    protobuf==7.36.2 google.protobuf   pydantic==2.14.4 pydantic   pydantic-core==2.50.5 pydantic_core
    annotated-types==0.8.0 annotated_types   typing-inspection==0.4.5 typing_inspection
    requests==2.34.2 requests   urllib3==2.8.0 urllib3   idna==3.20 idna   certifi==2026.10.19.post1 certifi
    charset-normalizer==3.5.3 charset_normalizer   xxhash==4.1.0 xxhash
    opentelemetry-api==1.45.2 opentelemetry.trace   opentelemetry-sdk==1.45.2 opentelemetry.sdk
    opentelemetry-semantic-conventions==0.66b2 opentelemetry.semconv
    opentelemetry-proto==1.45.2 opentelemetry.proto
    opentelemetry-exporter-otlp-proto-common==1.45.2 opentelemetry.exporter.otlp.proto.common
    opentelemetry-exporter-otlp-proto-http==1.45.2 opentelemetry.exporter.otlp.proto.http
    opentelemetry-exporter-otlp-common==0.66b2 opentelemetry.exporter.otlp.common
    opentelemetry-exporter-http-transport==0.66b2 opentelemetry.exporter.http.transport
    googleapis-common-protos==1.76.0 google.api.http_pb2   httpx==0.28.1 httpx   httpcore==1.0.9 httpcore
    h11==0.16.0 h11   anyio==4.16.0 anyio   sniffio==1.3.1 sniffio   distro==1.9.0 distro
    """,
    "solo.utils.auto_umap imports it, or what it imports requires it",
)
#: ``pack.py --extra NAME``: a kit of its own holding only these wheels (no data, no solo-learn)
EXTRAS: dict[str, tuple[Need, ...]] = {"dali": DALI_NEEDED, "umap": UMAP_NEEDED}
# Left out on purpose: wandb unless --extra umap (the runs say wandb.enabled=false; timm imports it only
# if present), einops (listed by solo-learn, imported nowhere in solo/), matplotlib (only main_compare.py).


def normalize(name: str) -> str:
    """PEP 503 name, so that ``--have scikit_learn`` and ``scikit-learn`` match."""
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
        if key in have and (need.policy == IF_MISSING or have[key] is None or have[key] == need.version):
            notes.append(f"skip {need.requirement}: the target has {need.name} {have[key] or ''}".rstrip())
            continue
        if key in have:
            notes.append(f"pack {need.requirement}: the target has {have[key]}, {need.why}")
        keep.append(need)
    return keep, notes
