"""Checkpoints a run resumes from or evaluates: a truncated one is skipped, a non-checkpoint is said in one line."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from helpers import assert_one_line, pretrain_args, run_entry, tiny_overrides

from mvssl_plugin.runs import is_complete_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")


def linear_args(data: dict, out: Path, checkpoint: Path | str) -> list[str]:
    overrides = [o for o in tiny_overrides(data, out) if not o.startswith(("method_kwargs", "auto_resume"))]
    return ["--config-name", "linear_cifar.yaml", f"pretrained_feature_extractor={checkpoint}", *overrides]


@pytest.mark.slow
def test_truncated_only_checkpoint_is_skipped_and_a_new_run_starts(finished_tiny_run, tiny_cifar, tmp_path):
    run_dir = shutil.copytree(finished_tiny_run, tmp_path / "mabt" / finished_tiny_run.name)
    (ckpt,) = run_dir.glob("*.ckpt")
    with open(ckpt, "r+b") as handle:
        handle.truncate(ckpt.stat().st_size // 2)
    assert not is_complete_checkpoint(ckpt)
    args = pretrain_args(tiny_cifar, tmp_path, **{"auto_resume.enabled": True})
    result = run_entry("main_pretrain.py", args, tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert f"mvssl: skipped unreadable checkpoint {ckpt} (truncated or not a checkpoint); it is left in place" in (
        result.stdout
    )
    assert "mvssl: no complete checkpoint of a matching run: starting a new run" in result.stdout
    runs = sorted(p.name for p in (tmp_path / "mabt").iterdir())
    assert len(runs) == 2 and ckpt.exists(), runs  # a new run folder; the broken file left as it was
    (new_dir,) = [tmp_path / "mabt" / name for name in runs if name != run_dir.name]
    assert [is_complete_checkpoint(p) for p in new_dir.glob("*.ckpt")] == [True]


@pytest.mark.slow
def test_checkpoints_auto_resume_passes_over_are_named_with_how_to_go_on_from_them(
    finished_tiny_run, tiny_cifar, tmp_path
):
    """A run folder that lost its args.json (``git clean`` keeps the ignored .ckpt) and a run
    last written before ``auto_resume.max_hours`` are not resumed: the launch says which and
    why, starts a new run, and each remedy it names resumes that checkpoint."""
    orphan = shutil.copytree(finished_tiny_run, tmp_path / "mabt" / "orphan")
    (orphan / "args.json").unlink()
    stale = shutil.copytree(finished_tiny_run, tmp_path / "mabt" / finished_tiny_run.name)
    (orphan_ckpt,), (stale_ckpt,) = orphan.glob("*.ckpt"), stale.glob("*.ckpt")
    then = time.time() - 40 * 3600
    os.utime(stale_ckpt, (then, then))
    args = pretrain_args(tiny_cifar, tmp_path, **{"auto_resume.enabled": True})
    result = run_entry("main_pretrain.py", args, tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert (
        f"mvssl: passed over {orphan_ckpt}: no args.json beside it, so its settings are unknown; to go on from "
        f"it, name it: +resume_from_checkpoint='{orphan_ckpt}'"
    ) in result.stdout
    assert (
        f"mvssl: passed over {stale_ckpt}: written 40 h ago, more than auto_resume.max_hours=36: raise it to go on "
        "from it"
    ) in result.stdout
    assert "mvssl: no complete checkpoint of a matching run: starting a new run" in result.stdout
    (new_run,) = [d for d in (tmp_path / "mabt").iterdir() if d not in (orphan, stale)]
    shutil.rmtree(new_run)
    raised = run_entry("main_pretrain.py", args + ["++auto_resume.max_hours=100"], tmp_path)
    assert raised.returncode == 0, raised.stdout[-2000:] + raised.stderr[-3000:]
    assert f"resuming from the newest complete checkpoint that matches this config: {stale_ckpt}" in raised.stdout
    named = run_entry("main_pretrain.py", args + [f"+resume_from_checkpoint='{orphan_ckpt}'"], tmp_path)
    assert named.returncode == 0, named.stdout[-2000:] + named.stderr[-3000:]
    assert "passed over" not in named.stdout
    assert f"Restoring states from the checkpoint path at {orphan_ckpt}" in named.stdout + named.stderr


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
