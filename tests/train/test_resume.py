"""Resume (train/resume.py) as a user meets it through main_pretrain.py: which checkpoint a
relaunch goes on from, and each one it passes over named with how to go on from it."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from helpers import pretrain_args, run_entry

from mvssl_plugin.runs import is_complete_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")


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
def test_a_run_of_another_max_epochs_is_named_with_the_overrides_that_continue_it(
    finished_tiny_run, tiny_cifar, tmp_path
):
    """A run finished with max_epochs=1, the same command relaunched with max_epochs=2: a new
    run starts, saying which run it did not continue, why, and the overrides that continue it;
    with those the first run goes on in its own folder."""
    run_dir = shutil.copytree(finished_tiny_run, tmp_path / "mabt" / finished_tiny_run.name)
    (ckpt,) = run_dir.glob("*.ckpt")
    args = pretrain_args(tiny_cifar, tmp_path, **{"auto_resume.enabled": True, "max_epochs": 2})
    result = run_entry("main_pretrain.py", args, tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert (
        f"mvssl: passed over {ckpt}: a run of these settings with max_epochs=1 (finished), not continued: its "
        "learning-rate schedule and solo-learn's auto-resume depend on max_epochs; to continue it to max_epochs=2 "
        f"instead of starting anew: +resume_from_checkpoint='{ckpt}' auto_resume.accept_changes=true"
    ) in result.stdout
    assert "mvssl: no complete checkpoint of a matching run: starting a new run" in result.stdout
    (new_run,) = [d for d in (tmp_path / "mabt").iterdir() if d != run_dir]
    shutil.rmtree(new_run)
    continued = args + [f"+resume_from_checkpoint='{ckpt}'", "auto_resume.accept_changes=true"]
    result = run_entry("main_pretrain.py", continued, tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "max_epochs: 1 -> 2" in result.stdout and "passed over" not in result.stdout
    assert [d.name for d in (tmp_path / "mabt").iterdir()] == [run_dir.name]  # no second folder
    assert any(p.name.endswith("ep=1.ckpt") for p in run_dir.glob("*.ckpt"))  # epoch 2, in the first run's folder
