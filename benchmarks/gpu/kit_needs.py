"""What the offline GPU kit carries beyond the target's own packages: each package a run needs,
its version and why (``NEEDED``, and the optional items' ``EXTRAS``), and which of them to pack
given what the target has (``--have``). ``pack.py`` packs them; the runner installs them.
Standard library only, Python 3.9+."""

from __future__ import annotations

import dataclasses
import re
from typing import Iterable, Optional


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
#: ``--with-dali``: NVIDIA DALI (data.format=dali, the plugin's loader and solo-learn's) for the target's
#: CUDA 13 (its torch is a cu130 build: DALI's cuda120 build would load CUDA 12 libraries beside it) and
#: what DALI 2.4.0 requires (its wheel's Requires-Dist: nvimgcodec-cu13[all] < 0.10, libnvcomp-cu13 ==
#: 5.3.0.16; of nvimgcodec's extras only nvjpeg, the JPEG decoder, on CUDA 13.0 as the target's torch;
#: JPEG 2000 and TIFF are left out). About 247 MiB (measured 2026-12-06: the DALI wheel 189.5, libnvcomp
#: 27.2, nvimgcodec 23.9, nvjpeg 3.6): its own item, cut after the data, so the other items install and
#: run while its parts still travel. nvjpeg's files land in ``nvidia/cu13`` beside the target's own CUDA
#: libraries, so it is pinned (always installed), not checked by import.
DALI_NEEDED: tuple[Need, ...] = (
    Need("nvidia-dali-cuda130==2.4.0", "nvidia.dali", "if_missing", "data.format=dali, dali.device=gpu"),
    Need("nvidia-nvimgcodec-cu13==0.9.0.20", "nvidia.nvimgcodec", "if_missing", "DALI 2.4 decodes with it"),
    Need("nvidia-libnvcomp-cu13==5.3.0.16", "nvidia.libnvcomp", "if_missing", "DALI 2.4 requires it"),
    Need("nvidia-nvjpeg==13.0.4.44", "nvidia.cu13", "pin", "nvimgcodec's JPEG decoder on the GPU (CUDA 13.0)"),
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
