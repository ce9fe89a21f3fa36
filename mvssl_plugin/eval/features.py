"""A pretrained run back in memory, and its backbone / projector features of a dataset.

Runs are solo-learn run folders (args.json + checkpoints), of the plugin's methods or of
solo-learn's own: the method is rebuilt from args.json and every weight loaded (strictly:
a partial load would evaluate a half-random network without a word).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

import torch
from omegaconf import OmegaConf
from torch import nn
from torch.utils.data import DataLoader

from mvssl_plugin.errors import ConfigError
from mvssl_plugin.files import read_json
from mvssl_plugin.progress import progress
from mvssl_plugin.registry import register
from mvssl_plugin.runs import run_files


def load_pretrained(path: str | Path) -> Tuple[nn.Module, OmegaConf, Path]:
    """The pretraining method of a run, rebuilt from args.json with its checkpoint's weights;
    returns (model, config, the checkpoint read)."""
    args_path, ckpt = run_files(path)
    cfg = OmegaConf.create(read_json(args_path))
    methods = register()
    if cfg.method not in methods:
        raise ConfigError(f"{args_path}: method {cfg.method!r} is not registered in this solo-learn")
    with _without_resume_caution():
        model = methods[cfg.method](cfg)
    try:
        state = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]
    except Exception as err:  # a zip archive that is not a Lightning checkpoint
        raise ConfigError(f"{ckpt}: not a Lightning checkpoint ({type(err).__name__}): point at a run folder") from None
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ConfigError(f"{ckpt}: weights do not fit the method args.json describes (missing {missing[:3]})")
    return model.eval(), cfg, ckpt


class _ResumeCaution(logging.Filter):
    """solo-learn's methods log "Using scheduler_interval=step might generate issues when
    resuming a checkpoint" when built; an evaluation builds one and resumes nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Using scheduler_interval=")


@contextlib.contextmanager
def _without_resume_caution() -> Iterator[None]:
    caution = _ResumeCaution()
    root = logging.getLogger()
    root.addFilter(caution)
    try:
        yield
    finally:
        root.removeFilter(caution)


@torch.no_grad()
def extract_features(
    model: Callable, loader: DataLoader, device: torch.device, desc: Optional[str] = None
) -> Dict[str, torch.Tensor]:
    """``{"backbone": (N, F), "projector": (N, d), "labels": (N,)}`` on the CPU, in loader order.

    ``model`` maps images to solo-learn's output dict (``feats``, and ``z`` when it has a
    projector) and sits on ``device`` in eval mode; batches are ``(images, labels)``.
    ``desc``: show progress with this title on stderr (:func:`mvssl_plugin.progress.progress`:
    a bar on a terminal, a line every few percent in a log)."""
    backbone, projector, labels = [], [], []
    for images, targets in progress(loader, desc):
        out = model(images.to(device, non_blocking=True))
        backbone.append(out["feats"].float().cpu())
        if "z" in out:
            projector.append(out["z"].float().cpu())
        labels.append(targets.cpu())
    features = {"backbone": torch.cat(backbone), "labels": torch.cat(labels)}
    if projector:
        features["projector"] = torch.cat(projector)
    return features
