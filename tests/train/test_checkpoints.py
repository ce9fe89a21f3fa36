"""Checkpoints a run resumes from or evaluates: a truncated one is skipped, a non-checkpoint is said in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import assert_one_line, run_entry, tiny_overrides

pytestmark = pytest.mark.usefixtures("one_thread")


def linear_args(data: dict, out: Path, checkpoint: Path | str) -> list[str]:
    overrides = [o for o in tiny_overrides(data, out) if not o.startswith(("method_kwargs", "auto_resume"))]
    return ["--config-name", "linear_cifar.yaml", f"pretrained_feature_extractor={checkpoint}", *overrides]


@pytest.mark.slow
@pytest.mark.parametrize("what", ["file", "empty folder"])
def test_evaluations_on_a_non_checkpoint_say_so_in_one_line(what, tiny_cifar, tmp_path):
    if what == "file":
        target = tmp_path / "notes.ckpt"
        target.write_text("not a checkpoint")
    else:
        target = tmp_path / "empty_run"
        target.mkdir()
    linear = run_entry("main_linear.py", linear_args(tiny_cifar, tmp_path, target), tmp_path)
    assert_one_line(linear, 2, f"pretrained_feature_extractor={str(target)!r}")
    knn_args = ["--pretrained_checkpoint_dir", str(target), "--dataset", "cifar10"]
    knn_args += ["--train_data_path", tiny_cifar["train"], "--val_data_path", tiny_cifar["test"], "--num_workers", "0"]
    knn = run_entry("main_knn.py", knn_args, tmp_path)
    assert_one_line(knn, 2, repr(str(target)))
    assert not (tmp_path / "linear").exists()


def test_a_crash_in_a_callers_epoch_work_leaves_that_epoch_without_a_checkpoint(tiny_cifar, tmp_path):
    """A benchmark's per-epoch row is written before the epoch's checkpoint: if writing it
    fails, the resume trains the epoch again and writes its row, rather than going on past it
    (the CPU claims baseline lost epoch 11's row to a crash after its checkpoint)."""
    from lightning.pytorch.callbacks import Callback

    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.train.pretrain import pretrain

    class FailsAtEpoch2(Callback):
        def on_train_epoch_end(self, trainer, pl_module) -> None:
            if trainer.current_epoch == 1:
                raise RuntimeError("the row could not be written")

    cfg = compose_recipe(
        "mabt_cifar.yaml", "pretrain", tiny_overrides(tiny_cifar, tmp_path, max_epochs=3, precision=32)
    )
    with pytest.raises(RuntimeError, match="could not be written"):
        pretrain(cfg, extra_callbacks=[FailsAtEpoch2()])
    epochs = sorted(p.name.split("ep=")[1].split(".")[0] for p in (tmp_path / "mabt").glob("*/*.ckpt"))
    assert epochs == ["0"]  # epoch 1's (the second) checkpoint would come after the failed row
