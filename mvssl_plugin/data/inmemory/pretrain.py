"""The in-memory pretraining loader a composed config asks for."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Tuple

from omegaconf import DictConfig, OmegaConf

from mvssl_plugin.config import world_size
from mvssl_plugin.data.inmemory.cache import check_fits, decode_to_uint8, default_cache_dir, memory_bytes_needed
from mvssl_plugin.data.inmemory.devices import training_device
from mvssl_plugin.data.inmemory.loader import MemoryMultiViewLoader
from mvssl_plugin.data.pipeline import ViewRecipe
from mvssl_plugin.data.resolution import ResolutionRamp, full_side


def describe_ramp(ramp: ResolutionRamp, epochs: int) -> str:
    """One line: each side and the epochs (0-based, as the epoch lines) it is trained at."""
    sides, spans = ramp.sides(epochs), []
    for side in dict.fromkeys(sides):
        at = [e for e, s in enumerate(sides) if s == side]
        strength = f" at {ramp.strength(side):.2f} of the augmentation" if ramp.strength_start < 1 else ""
        epochs_at = f"epoch{'s' if len(at) > 1 else ''} {at[0]}{f'-{at[-1]}' if len(at) > 1 else ''}"
        spans.append(f"{side} px{strength} in {epochs_at}")
    return f"views grow from {ramp.start} to {ramp.full} px (memory.resolution): " + ", ".join(spans)


def resolution_ramp(cfg: DictConfig) -> Optional[ResolutionRamp]:
    """``memory.resolution`` as a ramp of the largest pipeline's side (None when unset; its
    values checked by :func:`mvssl_plugin.data.key_checks.check_inmemory_options`)."""
    start = OmegaConf.select(cfg, "memory.resolution.start", default=None)
    if start is None:
        return None
    return ResolutionRamp(
        start=int(start),
        full=full_side(cfg.augmentations),
        ramp_start=float(OmegaConf.select(cfg, "memory.resolution.ramp_start", default=0.0)),
        ramp_end=float(OmegaConf.select(cfg, "memory.resolution.ramp_end", default=0.75)),
        multiple=int(OmegaConf.select(cfg, "memory.resolution.multiple", default=8)),
        strength_start=float(OmegaConf.select(cfg, "memory.resolution.strength_start", default=1.0)),
    )


def pretrain_memory_loader(cfg: DictConfig, files: Sequence[str], targets: Sequence[int]) -> MemoryMultiViewLoader:
    """The in-memory loader a composed pretraining config asks for: decodes (or reads the
    cache of) ``files`` after checking the data set fits the training device.

    Optional keys: ``memory.size`` (store every image at size x size), ``memory.cache_dir``
    (default :func:`default_cache_dir` of ``data.train_path``), ``memory.prefetch`` (cut the
    next step's views while this one trains; null: on a GPU only), ``memory.resolution``
    (smaller views early in the run: :func:`resolution_ramp`).
    """
    device = training_device(cfg)
    world = world_size(cfg)
    view_parallel = bool(cfg.method_kwargs.get("view_parallel", False))
    size = OmegaConf.select(cfg, "memory.size", default=None)
    cache_dir = OmegaConf.select(cfg, "memory.cache_dir", default=None)
    cache = Path(cache_dir) if cache_dir else default_cache_dir(cfg.data.train_path)
    # CPU: every process of this node holds its copy in the same RAM; GPU: one per device
    nodes = int(OmegaConf.select(cfg, "num_nodes", default=1) or 1)
    copies = 1 if device == "cuda" else max(1, world // nodes)

    def fits(shape: Tuple[int, int, int, int]) -> None:
        check_fits(memory_bytes_needed(shape[0], shape[2], shape[3]), device, copies)

    images = decode_to_uint8(
        files, None if size is None else int(size), cache, check=fits, notify=lambda text: print(f"mvssl: {text}")
    )
    ramp, epochs = resolution_ramp(cfg), int(OmegaConf.select(cfg, "max_epochs", default=1) or 1)
    if ramp is not None:
        print(f"mvssl: {describe_ramp(ramp, epochs)}")
    return MemoryMultiViewLoader(
        images,
        targets,
        [ViewRecipe.from_cfg(cfg.data.dataset, aug) for aug in cfg.augmentations],
        batch_size=int(cfg.optimizer.batch_size),
        device=device,
        seed=int(cfg.seed),
        shard=not view_parallel,
        world_size=world,
        prefetch=OmegaConf.select(cfg, "memory.prefetch", default=None),
        resolution=ramp,
        epochs=epochs,
    )
