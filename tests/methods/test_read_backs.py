"""No host read-back per step (issue 97): the value reads that make a GPU's host wait for the
device (``.item()``, ``bool(tensor)``) counted on a CPU by a dispatch mode that records them, a
CUDA-free stand-in for ``torch.cuda.set_sync_debug_mode("error")``."""

from __future__ import annotations

from typing import List

import pytest
import torch
from lightning.pytorch import Trainer
from torch.utils._python_dispatch import TorchDispatchMode

import mvssl_plugin.losses.distributed as distributed
from mvssl_plugin.cli.config_name import compose_recipe
from mvssl_plugin.methods.finite_loss import FiniteLoss
from mvssl_plugin.methods.mavicreg import MultiAugVICReg
from mvssl_plugin.synthetic import tiny_overrides
from mvssl_plugin.train.pretrain import build_pretrain_model, pretrain

#: the ATen calls that copy a value from the device to the host
READ_BACKS = {torch.ops.aten._local_scalar_dense.default, torch.ops.aten.is_nonzero.default}


class ReadBacks(TorchDispatchMode):
    """Counts the device-to-host value reads run inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func in READ_BACKS
        return func(*args, **(kwargs or {}))


def test_the_stand_in_sees_a_read_back_and_nothing_else():
    x = torch.randn(4)
    with ReadBacks() as seen:
        y = (x * 2).sum()
    assert seen.count == 0
    with ReadBacks() as seen:
        bool(torch.isfinite(y))
        y.item()
    assert seen.count == 2


def _steps_counted(tiny_cifar, tmp_path, monkeypatch, every: int) -> List[int]:
    """A tiny mavicreg run through ``pretrain``; the read-backs of each whole step: the training
    step and the callbacks' batch end, where ``FiniteLoss`` reads."""
    counts: List[int] = []
    step, batch_end = MultiAugVICReg.training_step, FiniteLoss.on_train_batch_end

    def counted_step(self, *args, **kwargs):
        with ReadBacks() as seen:
            out = step(self, *args, **kwargs)
        counts.append(seen.count)
        return out

    def counted_batch_end(self, *args, **kwargs):
        with ReadBacks() as seen:
            batch_end(self, *args, **kwargs)
        counts[-1] += seen.count

    monkeypatch.setattr(MultiAugVICReg, "training_step", counted_step)
    monkeypatch.setattr(FiniteLoss, "on_train_batch_end", counted_batch_end)
    extra = {"+performance.finite_check_every": every, "max_epochs": 2, "optimizer.batch_size": 4}
    pretrain(compose_recipe("mavicreg_cifar.yaml", "pretrain", tiny_overrides(tiny_cifar, tmp_path, **extra)))
    return counts


def test_every_n_steps_the_step_reads_back_once_and_not_between(tiny_cifar, tmp_path, monkeypatch, one_thread):
    counts = _steps_counted(tiny_cifar, tmp_path, monkeypatch, every=4)
    assert len(counts) >= 8
    assert [i for i, c in enumerate(counts) if c] == [i for i in range(len(counts)) if (i + 1) % 4 == 0]
    assert set(counts) == {0, 1}  # one reader: the callback, not the method beside it


def test_on_a_cpu_auto_reads_back_every_step_to_stop_before_the_update(tiny_cifar, tmp_path, monkeypatch, one_thread):
    counts = _steps_counted(tiny_cifar, tmp_path, monkeypatch, every="auto")
    # the method's read before backward and the callback's after it: a CPU's reads cost no wait
    assert counts and set(counts) == {2}


def test_a_method_brings_its_finite_check_where_the_script_has_none(tiny_cifar, tmp_path):
    """solo-learn's own main_pretrain.py builds its Trainer without the plugin's callbacks."""
    overrides = tiny_overrides(tiny_cifar, tmp_path, **{"+performance.finite_check_every": 50})
    _, model = build_pretrain_model(compose_recipe("mavicreg_cifar.yaml", "pretrain", overrides), notify=lambda _: None)
    model.trainer = Trainer(callbacks=[], logger=False, enable_progress_bar=False, enable_checkpointing=False)
    (guard,) = model.configure_callbacks()
    assert isinstance(guard, FiniteLoss) and guard.every == 50
    model.trainer = Trainer(callbacks=[FiniteLoss(50)], logger=False, enable_progress_bar=False)
    assert model.configure_callbacks() == []


class _Trainer:
    current_epoch = 0

    def __init__(self) -> None:
        self.global_step = 0


def test_the_callback_reads_a_device_flag_every_n_steps_and_at_the_epochs_end():
    trainer, guard = _Trainer(), FiniteLoss(every=5)
    losses = [1.0, 2.0, float("nan"), 1.0]
    with ReadBacks() as seen:
        for loss in losses:
            trainer.global_step += 1
            guard.on_train_batch_end(trainer, torch.nn.Identity(), {"loss": torch.tensor(loss)}, None, 0)
    assert seen.count == 0  # the NaN of step 3 is on the device, not yet read
    with pytest.raises(FloatingPointError, match=r"was not finite at a step from 0 to 4 \(epoch 0\): training stopped"):
        guard.on_train_epoch_end(trainer, torch.nn.Identity())


def test_the_global_batch_is_the_local_one_times_the_processes_without_a_collective(monkeypatch):
    def no_collective(*args, **kwargs):
        raise AssertionError("a collective (and its read-back) for a number every process knows")

    monkeypatch.setattr(distributed, "is_distributed", lambda: True)
    monkeypatch.setattr(distributed.dist, "get_world_size", lambda: 3)
    monkeypatch.setattr(distributed.dist, "all_reduce", no_collective)
    assert distributed.global_batch_size(8) == 24
