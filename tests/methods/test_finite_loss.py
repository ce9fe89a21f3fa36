"""A run whose loss turns NaN or infinite stops with one line and exit 3, whatever its method:
solo-learn's own methods too, through main_pretrain.py (methods/finite_loss.py)."""

from __future__ import annotations

import pytest
import torch

from mvssl_plugin.methods.finite_loss import FiniteLoss


class _Trainer:
    current_epoch, global_step = 2, 37


@pytest.mark.parametrize("outputs", [{"loss": torch.tensor(1.5)}, torch.tensor(0.2), None])
def test_a_finite_loss_goes_on(outputs):
    FiniteLoss().on_train_batch_end(_Trainer(), torch.nn.Identity(), outputs, None, 0)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_non_finite_loss_stops_naming_where_and_what_to_change(value):
    with pytest.raises(FloatingPointError, match=r"is (nan|inf) at epoch 2, step 37: training stopped.*optimizer\.lr"):
        FiniteLoss().on_train_batch_end(_Trainer(), torch.nn.Identity(), {"loss": torch.tensor(value)}, None, 0)


@pytest.mark.slow
def test_solo_learns_vicreg_diverging_stops_with_exit_3_and_writes_no_nan_checkpoint(tiny_cifar, tmp_path, one_thread):
    """solo-learn's VICReg recipe with Adam at an absurd lr: its weights overflow within the first
    epoch; the run ends at that step instead of training on NaN weights."""
    from helpers import assert_one_line, run_entry, tiny_overrides

    tiny = [o.lstrip("+") for o in tiny_overrides(tiny_cifar, tmp_path) if "proj_output_dim" not in o]
    args = ["--config-name", "solo_vicreg_cifar_cpu.yaml", *tiny, "data.val_fraction=-1", "max_epochs=2"]
    args += ["optimizer.name=adam", "~optimizer.kwargs", "scheduler.name=none", "optimizer.lr=1e30"]
    line = assert_one_line(run_entry("main_pretrain.py", args, cwd=tmp_path), 3, "training stopped", "VICReg")
    assert "optimizer.lr" in line
    assert not list(tmp_path.rglob("*.ckpt"))
