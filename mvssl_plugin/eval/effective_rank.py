"""Effective rank during training, as a Lightning callback switched on from the YAML
(``effective_rank``): RankMe of backbone and projector embeddings of a fixed set of
validation images each epoch -> logged as ``rank_backbone`` / ``rank_projector`` (so in
wandb and ``metrics.csv``)."""

from __future__ import annotations

from typing import Optional

import torch
from lightning.pytorch.callbacks import Callback

from mvssl_plugin.eval.rankme import rankme


class EffectiveRank(Callback):
    """RankMe of the backbone features and projector outputs of the first ``num_samples``
    validation images (fixed for the run), after every validation epoch."""

    def __init__(self, num_samples: int = 1024, batch_size: int = 256) -> None:
        self.num_samples, self.batch_size = num_samples, batch_size
        self._images: Optional[torch.Tensor] = None

    def _collect(self, trainer) -> Optional[torch.Tensor]:
        loaders = trainer.val_dataloaders
        loader = loaders[0] if isinstance(loaders, (list, tuple)) else loaders
        if loader is None:
            return None
        images, count = [], 0
        # a loader's iterator draws its seed from the global generator: keep the run's
        # random stream (shuffles, augmentations) as it would be without this callback
        with torch.random.fork_rng(devices=[]):
            for batch in loader:
                images.append(batch[0])
                count += len(batch[0])
                if count >= self.num_samples:
                    break
        return torch.cat(images)[: self.num_samples]

    @torch.no_grad()
    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking:
            return
        if self._images is None:
            self._images = self._collect(trainer)
            if self._images is None:
                return
        was_training = pl_module.training
        pl_module.eval()
        feats, z = [], []
        for chunk in self._images.split(self.batch_size):
            out = pl_module(chunk.to(pl_module.device))
            feats.append(out["feats"].float())
            if "z" in out:
                z.append(out["z"].float())
        pl_module.train(was_training)
        pl_module.log("rank_backbone", rankme(torch.cat(feats)), sync_dist=False, rank_zero_only=True)
        if z:
            pl_module.log("rank_projector", rankme(torch.cat(z)), sync_dist=False, rank_zero_only=True)
