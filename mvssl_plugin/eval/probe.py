"""Linear probe on cached features: the sweep-friendly stand-in for the full linear flow.

The backbone runs once per patch, not once per epoch: features of k augmented patches per
training image and of P patches per test image are computed up front, then a linear
classifier trains on them for many epochs at the cost of a matrix product. The defaults
are the paper's protocol (Agrawal, Ghosh, Sodhani, Oberman, Richards, NeurIPS 2024, after
the authors' released code): Adam, lr 1e-3, batch 512, weight decay 1e-6, 200 epochs, label
smoothing 0.1, test logits averaged over 16 patches (for a linear layer the same as averaging
the features). Pure torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import torch
from torch import nn


@dataclass(frozen=True)
class ProbeSettings:
    epochs: int = 200
    lr: float = 1e-3
    batch_size: int = 512
    weight_decay: float = 1e-6
    label_smoothing: float = 0.0  # the authors' released evaluation uses 0.1
    seed: int = 0


def train_probe(features: torch.Tensor, labels: torch.Tensor, num_classes: int, settings: ProbeSettings) -> nn.Linear:
    """A linear classifier on ``features`` ``(N, F)`` (all patches of all images) and
    ``labels`` ``(N,)``, trained with Adam on shuffled mini-batches."""
    generator = torch.Generator().manual_seed(settings.seed)
    probe = nn.Linear(features.shape[1], num_classes).to(features.device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings.seed)
        probe.reset_parameters()
    optimizer = torch.optim.Adam(probe.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=settings.label_smoothing)
    for _ in range(settings.epochs):
        order = torch.randperm(len(features), generator=generator).to(features.device)
        for start in range(0, len(order), settings.batch_size):
            batch = order[start : start + settings.batch_size]
            optimizer.zero_grad(set_to_none=True)
            loss_fn(probe(features[batch]), labels[batch]).backward()
            optimizer.step()
    return probe


@torch.no_grad()
def patch_accuracy(probe: nn.Linear, features: torch.Tensor, labels: torch.Tensor) -> Tuple[float, float]:
    """Top-1 / top-5 accuracy (%) with logits averaged over patches.

    Args:
        features: ``(P, N, F)``, P patches of each of N images (P = 1: one view).
        labels: ``(N,)``.
    """
    logits = probe(features).mean(dim=0)
    top = logits.topk(min(5, logits.shape[1]), dim=1).indices
    hit = top == labels[:, None]
    return 100.0 * hit[:, 0].float().mean().item(), 100.0 * hit.any(dim=1).float().mean().item()
