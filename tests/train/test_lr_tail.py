"""``scheduler.tail_epochs`` as a user sets it: checked before any work, and through
main_pretrain.py a constant lr that falls linearly to zero over the last epochs, also in a run
that goes on from a constant run's checkpoint (which holds no scheduler state)."""

from __future__ import annotations

import pytest
import torch
from helpers import assert_one_line, checked_config, run_entry, tiny_overrides

from mvssl_plugin.config import check_training_keys
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.lr_tail_factor import tail_factor
from mvssl_plugin.train.lr_tail import BASE_LR

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        ({"++scheduler.tail_epochs": 3, "max_epochs": 2}, "tail_epochs=3: must be an integer in [0, max_epochs=2]"),
        ({"++scheduler.tail_epochs": -1}, "must be an integer in [0, max_epochs"),
        ({"++scheduler.tail_epochs": 1, "scheduler.name": "warmup_cosine"}, "set scheduler.name=none"),
    ],
)
def test_a_tail_the_run_cannot_take_is_refused_naming_the_fix(overrides, fragment):
    cfg = checked_config("speedrun_cpu.yaml", "cpu", **overrides)
    with pytest.raises(ConfigError) as error:
        check_training_keys(cfg, ("adam", "lars", "sgd", "adamw"))
    assert fragment in str(error.value)


def _lrs(ckpt) -> tuple:
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    groups = state["optimizer_states"][0]["param_groups"]
    return state["global_step"], [g["lr"] for g in groups], [g.get(BASE_LR) for g in groups], state["lr_schedulers"]


@pytest.mark.slow
def test_a_run_goes_on_from_a_constant_runs_checkpoint_into_its_tail(tiny_cifar, tmp_path):
    """One constant epoch, then a launch of 3 epochs with a 2-epoch tail resuming its checkpoint
    (as the speedrun's tail runs go on from their constant twin): epoch 2 ends inside the tail,
    epoch 3 at the last step's 1 / tail_steps of the constant lr."""
    tiny = [o.lstrip("+") for o in tiny_overrides(tiny_cifar, tmp_path) if "proj_output_dim" not in o]
    tiny.append("data.val_fraction=-1")
    first = run_entry("main_pretrain.py", ["--config-name", "speedrun_cpu.yaml", *tiny, "name=constant"], tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    (constant,) = tmp_path.rglob("*ep=0.ckpt")
    per_epoch, lrs, bases, schedulers = _lrs(constant)
    assert schedulers == [] and set(bases) == {None}  # a constant run: no scheduler, no tail
    constant_lrs = lrs
    go_on = [
        *[o for o in tiny if not o.startswith("max_epochs")],
        "max_epochs=3",
        "++scheduler.tail_epochs=2",
        "++checkpoint.keep_prev=true",
        f"+resume_from_checkpoint='{constant}'",
        "auto_resume.accept_changes=true",
        "name=constant",
    ]
    result = run_entry("main_pretrain.py", ["--config-name", "speedrun_cpu.yaml", *go_on], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    total, tail = 3 * per_epoch, 2 * per_epoch
    for epoch in (1, 2):
        (ckpt,) = tmp_path.rglob(f"*ep={epoch}.ckpt")
        step, lrs, bases, _ = _lrs(ckpt)
        assert step == (epoch + 1) * per_epoch
        assert bases == constant_lrs  # the tail scales the constant run's lr (each group's own)
        factor = tail_factor(step - 1, total, tail)  # the lr of the epoch's last step
        assert lrs == pytest.approx([b * factor for b in bases])
    assert factor == pytest.approx(1 / tail) and 0 < factor < 1
    # the encoder taken out of the run says so
    import json

    from mvssl_plugin.encoder.export import export

    out = export(ckpt, tmp_path / "encoder", notify=lambda _: None)
    assert json.loads((out / "config.json").read_text())["training"]["lr_tail_epochs"] == 2
    assert "lr linear to zero over the last 2 epochs" in (out / "README.md").read_text()


@pytest.mark.slow
def test_a_bad_tail_stops_main_pretrain_in_one_line(tiny_cifar, tmp_path):
    tiny = [o.lstrip("+") for o in tiny_overrides(tiny_cifar, tmp_path) if "proj_output_dim" not in o]
    args = ["--config-name", "speedrun_cpu.yaml", *tiny, "++scheduler.tail_epochs=2"]
    assert_one_line(run_entry("main_pretrain.py", args, tmp_path), 2, "scheduler.tail_epochs=2: must be an integer")
