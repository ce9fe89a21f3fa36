"""The backbone's kNN after every epoch, on the run's own clock (``epoch_knn``).

After each training epoch, the backbone embeds the bank (every training image, no augmentation)
and each held-out set (``val``: ``data.val_path``; ``holdout``: the ``data.holdout`` split), and a
weighted kNN (solo-learn's, k neighbours, cosine, ``exp(sim / T)`` votes) classifies the queries.
Its seconds are off the training clock (:meth:`TrainClock.stop_at`), so the training
seconds beside each figure are what a run without it would have spent. Rows go to the console,
``metrics.csv`` (``knn_<set>_acc1``), wandb and ``epoch_knn.csv``; at the end of training, the
minutes from which each curve stays at or above each target
(:func:`~mvssl_plugin.eval.time_to_accuracy.stays_at_or_above`). With ``stop_after_minutes``, the
run ends after the first epoch whose training clock reaches it: a budget of training time, the
same for every method and machine, instead of a number of epochs; launched again once it is spent,
it trains nothing."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Dict, List, Optional

import torch
from lightning.pytorch.callbacks import Callback

from mvssl_plugin.data.inmemory.eval_loaders import LabelledImages, MemoryEvalLoader
from mvssl_plugin.data.pipeline import ViewRecipe
from mvssl_plugin.eval.knn_grid import all_classes_knn
from mvssl_plugin.eval.time_to_accuracy import stays_at_or_above
from mvssl_plugin.files import write_csv
from mvssl_plugin.runs import EPOCH_KNN
from mvssl_plugin.train.run_log import RunLog, run_folder

#: images per forward pass of the evaluation (no gradients: larger than a training batch)
EVAL_BATCH = 512


def acc_key(name: str) -> str:
    """The logged metric of a query set: ``knn_val_acc1``, ``knn_holdout_acc1``."""
    return f"knn_{name}_acc1"


def targets_text(rows: Sequence[dict], names: Sequence[str], targets: Sequence[float]) -> List[str]:
    """Lines, one per query set: the training minutes (and epoch) from which its curve stays at
    or above each target, or where it ended."""
    lines = []
    seconds = [float(r["train_seconds"]) for r in rows]
    for name in names:
        values = [float(r[acc_key(name)]) for r in rows]
        parts = []
        for target in targets:
            i = stays_at_or_above(values, target)
            reached = "-" if i is None else f"{seconds[i] / 60:.1f} min (epoch {rows[i]['epoch']})"
            parts.append(f"{target:g}%: {reached}")
        last = f"; last {values[-1]:.2f}%" if values else ""
        lines.append(f"  {name}: " + ", ".join(parts) + last)
    return lines


class EpochKNN(Callback):
    """kNN top-1 of the backbone on each query set after every epoch, off the training clock.

    ``bank`` and ``queries`` are decoded images with labels
    (:func:`~mvssl_plugin.data.inmemory.eval_loaders.epoch_knn_sets`); ``recipe`` normalizes them
    as solo-learn's evaluation transform does. The list of rows travels in checkpoints, so a
    resumed run reports its whole curve."""

    def __init__(
        self,
        recipe: ViewRecipe,
        bank: LabelledImages,
        queries: Dict[str, LabelledImages],
        k: int = 20,
        temperature: float = 0.07,
        targets: Sequence[float] = (50, 55, 60, 65, 70),
        stop_after_minutes: Optional[float] = None,
    ) -> None:
        self.recipe, self.bank, self.queries = recipe, bank, queries
        self.k, self.temperature = int(k), float(temperature)
        self.targets = sorted(float(t) for t in targets)
        self.stop_after = None if stop_after_minutes is None else float(stop_after_minutes) * 60
        self.rows: List[dict] = []
        self.clock: Optional[RunLog] = None  # set by build_trainer: the run's clock
        self.spent_before_start = False  # this launch found the budget spent: its summary is logged already

    def _loader(self, images: LabelledImages) -> MemoryEvalLoader:
        return MemoryEvalLoader(images[0], images[1], self.recipe, augment=False, batch_size=EVAL_BATCH)

    @torch.no_grad()
    def embed(self, pl_module, images: LabelledImages, bf16: bool) -> torch.Tensor:
        """(N, F) backbone features, in the run's precision, on the CPU."""
        feats = []
        with torch.autocast(pl_module.device.type, dtype=torch.bfloat16, enabled=bf16):
            for x, _ in self._loader(images):
                feats.append(pl_module(x.to(pl_module.device))["feats"].float().cpu())
        return torch.cat(feats)

    def evaluate(self, pl_module, bf16: bool = False) -> Dict[str, float]:
        """Top-1 (%) of every query set, the model left in the mode it was in."""
        was_training = pl_module.training
        pl_module.eval()
        try:
            bank = self.embed(pl_module, self.bank, bf16)
            bank_labels = torch.as_tensor(self.bank[1])
            out = {}
            for name, images in self.queries.items():
                knn = all_classes_knn(self.k, self.temperature, "cosine")
                knn(
                    train_features=bank,
                    train_targets=bank_labels,
                    test_features=self.embed(pl_module, images, bf16),
                    test_targets=torch.as_tensor(images[1]),
                )
                out[name] = round(float(knn.compute()[0]), 2)
            return out
        finally:
            pl_module.train(was_training)

    def budget_spent(self, train_seconds: float) -> bool:
        """Whether ``train_seconds`` of training reach ``stop_after_minutes`` (never without one)."""
        return self.stop_after is not None and train_seconds >= self.stop_after

    def on_train_start(self, trainer, pl_module) -> None:
        # a run relaunched once its budget is spent (the same command again, auto-resume) trains
        # nothing, as Lightning does past max_epochs: each launch would add an epoch to a finished curve
        spent = self.clock.train_now() if self.clock is not None else 0.0
        if not self.budget_spent(spent):
            return
        trainer.should_stop = self.spent_before_start = True
        if trainer.is_global_zero:
            print(
                f"mvssl: nothing to train: this run's {spent / 60:.2f} training minutes already reach "
                f"epoch_knn.stop_after_minutes={self.stop_after / 60:g}; raise it to train on",
                flush=True,
            )

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        clock = self.clock
        if clock is None or clock.stopped_by is not None:  # a part of an epoch: no row (train/signals.py)
            return
        began = time.perf_counter()
        clock.stop_at(began)
        accuracies = self.evaluate(pl_module, bf16="bf16" in str(trainer.precision))
        eval_seconds = time.perf_counter() - began
        row = {
            "epoch": trainer.current_epoch,
            "step": trainer.global_step,
            "train_seconds": round(clock.train_now(), 3),
            **{acc_key(name): acc for name, acc in accuracies.items()},
            "eval_seconds": round(eval_seconds, 3),
        }
        self.rows = [r for r in self.rows if int(r["epoch"]) < trainer.current_epoch] + [row]
        budget_spent = self.budget_spent(row["train_seconds"])
        if budget_spent:
            trainer.should_stop = True  # every rank reads the same row: they stop together
        for name, acc in accuracies.items():
            pl_module.log(acc_key(name), acc, on_step=False, on_epoch=True, sync_dist=False)
        pl_module.log("knn_eval_seconds", eval_seconds, on_step=False, on_epoch=True, sync_dist=False)
        if not trainer.is_global_zero:
            return
        sets = ", ".join(f"{name} {acc:.2f}%" for name, acc in accuracies.items())
        print(
            f"mvssl: epoch {trainer.current_epoch} kNN {sets} after {row['train_seconds'] / 60:.2f} training "
            f"minutes (the kNN took {eval_seconds:.1f} s, off the clock)",
            flush=True,
        )
        if budget_spent:
            print(
                f"mvssl: stopping after epoch {trainer.current_epoch}: {row['train_seconds'] / 60:.2f} training "
                f"minutes reach epoch_knn.stop_after_minutes={self.stop_after / 60:g}",  # type: ignore[operator]
                flush=True,
            )
        folder = run_folder(trainer)
        if folder is not None:
            write_csv(folder / EPOCH_KNN, self.rows)

    def on_train_end(self, trainer, pl_module) -> None:
        if not self.rows or not trainer.is_global_zero:
            return
        so_far = " so far" if self.clock is not None and self.clock.stopped_by is not None else ""
        print(
            f"mvssl: training minutes to each kNN accuracy{so_far} (from the epoch after which the curve stays at "
            "or above it; - where it does not yet):",
            *targets_text(self.rows, list(self.queries), self.targets),
            sep="\n",
            flush=True,
        )
        if trainer.logger is not None and not self.spent_before_start:
            summary = {}
            for name in self.queries:
                values = [float(r[acc_key(name)]) for r in self.rows]
                for target in self.targets:
                    i = stays_at_or_above(values, target)
                    if i is not None:
                        summary[f"{acc_key(name)}_minutes_to_{target:g}"] = float(self.rows[i]["train_seconds"]) / 60
            if summary:
                trainer.logger.log_metrics(summary, step=trainer.global_step)

    def state_dict(self) -> dict:
        return {"rows": self.rows}

    def load_state_dict(self, state_dict: dict) -> None:
        self.rows = list(state_dict.get("rows", []))
