"""Keeping a run's checkpoint at chosen epochs. The checkpointer keeps only its newest file, but
a run can be another's first epochs up to a point (a tail run is its constant twin until the
tail starts: ``speedrun.py --from-twin``); the twin's checkpoint at that epoch is copied aside
as it passes. Only the child imports this module (torch), and a run going on from another's
checkpoint (``claims.runner.go_on_from``: :func:`checkpoint_step`)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Collection

import torch
from lightning.pytorch.callbacks import Callback

from mvssl_plugin.runs import is_complete_checkpoint


def checkpoint_step(path: Path) -> int:
    """The optimizer steps a checkpoint was taken after."""
    return int(torch.load(path, map_location="cpu", weights_only=False)["global_step"])


class KeepCheckpoints(Callback):
    """Copies the run's checkpoint taken after each of ``epochs`` epochs (counted from 1) from
    ``run_folder`` into ``folder``, under its own name.

    It looks when the next epoch starts and when training ends: the checkpoint of an epoch's end
    is written by then, and the checkpointer removes it at its next save. The copy is found by its
    ``global_step``, not its name, and is written through a ``.part`` file, so a copy in ``folder``
    is always whole."""

    def __init__(self, run_folder: Path, folder: Path, epochs: Collection[int]) -> None:
        self.run_folder, self.folder, self.epochs = Path(run_folder), Path(folder), set(epochs)

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.keep(trainer)

    def on_train_end(self, trainer, pl_module) -> None:
        self.keep(trainer)

    def keep(self, trainer) -> None:
        per_epoch = trainer.num_training_batches
        if not trainer.is_global_zero or not per_epoch or trainer.global_step % per_epoch:
            return
        if trainer.global_step // per_epoch not in self.epochs:
            return
        newest_first = sorted(self.run_folder.rglob("*.ckpt"), key=lambda c: c.stat().st_mtime, reverse=True)
        for ckpt in newest_first:
            if is_complete_checkpoint(ckpt) and checkpoint_step(ckpt) == trainer.global_step:
                target = self.folder / ckpt.name
                if not target.is_file():
                    self.folder.mkdir(parents=True, exist_ok=True)
                    partial = target.with_name(target.name + ".part")
                    shutil.copy2(ckpt, partial)
                    partial.replace(target)
                    print(f"cpu_claims: kept {target} (step {trainer.global_step})", flush=True)
                return
        print(f"cpu_claims: no checkpoint at step {trainer.global_step} in {self.run_folder} to keep", flush=True)
