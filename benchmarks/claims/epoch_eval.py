"""The child's per-epoch evaluation: a Lightning callback that the run's own process adds to its
training (``runner.run_child``). Only the child imports this module: torch, Lightning and the
plugin's evaluation stay out of the parent harness (``--list``, the budget loop)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch
from lightning.pytorch.callbacks import Callback
from step_clock import cifar_root
from torchvision.datasets import ImageFolder

from mvssl_plugin.data.inmemory.cache import decode_to_uint8, default_cache_dir
from mvssl_plugin.data.inmemory.eval_loaders import MemoryEvalLoader, eval_recipe
from mvssl_plugin.eval.knn import all_classes_knn
from mvssl_plugin.eval.rankme import rankme
from mvssl_plugin.files import read_csv, write_csv
from mvssl_plugin.train.run_log import TrainClock

from .clocks import EpochPauses, cpu_description, pause_overlap
from .grid import Point, Scale


def labelled(root: Path, split: str) -> Tuple[torch.Tensor, List[int]]:
    """A split's images decoded (through the in-memory format's disk cache) and their labels."""
    samples = ImageFolder(str(root / split)).samples
    files, labels = [f for f, _ in samples], [y for _, y in samples]
    return decode_to_uint8(files, None, default_cache_dir(root / split)), labels


class EpochEval(Callback):
    """After every epoch, outside the training clock: the backbone's kNN and RankMe, and the
    epoch's clocks, as one row of the scale's ``curves.csv`` (``cpu_claims.py``'s docstring)."""

    def __init__(self, scale: Scale, point: Point, seed: int, pause_log: Optional[Path]) -> None:
        self.scale, self.point, self.seed, self.pause_log = scale, point, seed, pause_log
        self.name = point.name(seed)
        self.root = cifar_root()
        self.machine = cpu_description(scale.accelerator)
        self.pauses = EpochPauses(pause_log)

    def on_fit_start(self, trainer, pl_module) -> None:
        recipe, _ = eval_recipe("cifar10")
        bank, test = labelled(self.root, "train"), labelled(self.root, "test")
        self.loaders = [MemoryEvalLoader(x, y, recipe, augment=False, batch_size=512) for x, y in (bank, test)]
        self.clock = next(c for c in trainer.callbacks if isinstance(c, TrainClock))
        self.bf16 = "bf16" in str(trainer.precision)
        self.device_type = pl_module.device.type

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.pauses.begin(trainer.current_epoch, time.time())

    def state_dict(self) -> dict:
        return self.pauses.state(time.time())

    def load_state_dict(self, state_dict: dict) -> None:
        self.pauses.load(state_dict)

    @torch.no_grad()
    def embed(self, pl_module, loader) -> Dict[str, torch.Tensor]:
        feats, z, labels = [], [], []
        with torch.autocast(self.device_type, dtype=torch.bfloat16, enabled=self.bf16):
            for x, y in loader:
                out = pl_module(x.to(pl_module.device))
                feats.append(out["feats"].float().cpu())
                z.append(out["z"].float().cpu())
                labels.append(y)
        return {"backbone": torch.cat(feats), "projector": torch.cat(z), "labels": torch.cat(labels)}

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        scale, point, seed, name = self.scale, self.point, self.seed, self.name
        now = time.time()
        epoch = trainer.current_epoch + 1
        if trainer.global_step < epoch * trainer.num_training_batches:
            return  # a stop inside the epoch ends it early: no row, and the exit does not wait
        rows = [r for r in read_csv(scale.curves) if not (r["run"] == name and int(r["epoch"]) >= epoch)]
        earlier = [r for r in rows if r["run"] == name]
        paused_before = sum(float(r["paused_seconds"]) for r in earlier)
        paused = self.pauses.end(now)
        was_training = pl_module.training
        pl_module.eval()
        began, began_wall = time.perf_counter(), time.time()
        bank, test = (self.embed(pl_module, loader) for loader in self.loaders)
        knn = all_classes_knn(20, 0.07, "cosine")
        knn(
            train_features=bank["backbone"],
            train_targets=bank["labels"],
            test_features=test["backbone"],
            test_targets=test["labels"],
        )
        acc1, _ = knn.compute()
        pl_module.train(was_training)
        views = trainer.global_step * int(pl_module.cfg.optimizer.batch_size) * point.m
        row = {
            "run": name,
            "method": point.method,
            "m": point.m,
            "d": point.d,
            "beta": point.beta,
            "fraction": point.fraction,
            "seed": seed,
            "epoch": epoch,
            "step": trainer.global_step,
            "views_seen": views,
            "train_seconds": round(self.clock.train_seconds - paused_before - paused, 1),
            "paused_seconds": round(paused, 1),
            "knn_backbone": round(float(acc1), 2),
            "rank_projector": round(rankme(test["projector"]), 1),
            "rank_backbone": round(rankme(test["backbone"]), 1),
            "eval_seconds": round(
                time.perf_counter() - began - pause_overlap(self.pause_log, began_wall, time.time()), 1
            ),
            "precision": str(trainer.precision),
            "cpu": self.machine,
        }
        write_csv(scale.curves, rows + [row])
        print(f"cpu_claims: {name} epoch {epoch}: kNN {row['knn_backbone']}%, {row}", flush=True)
