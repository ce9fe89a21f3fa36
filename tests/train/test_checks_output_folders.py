"""Every folder a run writes is checked before any data is read (issue 24): a folder that
cannot be made or written ends the command in one line naming it, exit 2, with nothing built,
read or written. Through the entry points a user runs, with the settings a user gives."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from helpers import assert_one_line, run_entry, tiny_overrides

from mvssl_plugin.errors import ConfigError
from mvssl_plugin.files import check_writable_folder

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def a_file(tmp_path) -> Path:
    """A regular file where a folder is wanted: ``checkpoint.dir=<it>/runs`` cannot be made."""
    path = tmp_path / "not_a_folder"
    path.write_text("a file\n")
    return path


def fake_checkpoint(folder: Path) -> Path:
    """A complete torch archive, enough for the checks that come before the backbone loads."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "mabt-ep=0.ckpt"
    torch.save({"state_dict": {}}, path)
    return path


def assert_nothing_written(root: Path) -> None:
    assert not list(root.rglob("*.ckpt")) and not list(root.rglob("args.json")), sorted(root.rglob("*"))


def test_checkpoint_dir_below_a_file_stops_pretraining_before_any_work(tmp_path, tiny_cifar, a_file):
    """Once a NotADirectoryError traceback from solo-learn's checkpointer, after the model was built."""
    args = ["--config-name", "mabt_cifar.yaml", *tiny_overrides(tiny_cifar, a_file / "runs")]
    result = run_entry("main_pretrain.py", args, cwd=tmp_path)
    assert_one_line(result, 2, f"checkpoint.dir={a_file / 'runs'}", f"{a_file} is a file", "choose another folder")
    assert "mvssl run:" not in result.stdout  # the start block: nothing was built
    assert_nothing_written(tmp_path)


def test_wandb_folder_that_cannot_be_made_stops_pretraining(tmp_path, tiny_cifar):
    (tmp_path / "wandb").write_text("a file where wandb puts its folder\n")
    args = ["--config-name", "mabt_cifar.yaml", *tiny_overrides(tiny_cifar, tmp_path / "runs"), "wandb.enabled=true"]
    result = run_entry("main_pretrain.py", args, cwd=tmp_path, env={"WANDB_MODE": "offline"})
    assert_one_line(result, 2, "wandb.enabled=true", str(tmp_path / "wandb"), "is a file")
    assert_nothing_written(tmp_path)


def test_memory_cache_dir_below_a_file_stops_before_decoding(tmp_path, tiny_cifar, a_file):
    overrides = tiny_overrides(tiny_cifar, tmp_path / "runs", **{"data.format": "memory"})
    args = ["--config-name", "mabt_cifar.yaml", *overrides, f"memory.cache_dir={a_file / 'cache'}"]
    beside_data = Path(tiny_cifar["train"]).parent  # the shared data: other tests may have cached it
    cached = sorted(beside_data.rglob("*.npy"))
    result = run_entry("main_pretrain.py", args, cwd=tmp_path)
    assert_one_line(result, 2, f"memory.cache_dir={a_file / 'cache'}", "is a file")
    assert sorted(beside_data.rglob("*.npy")) == cached and not list(tmp_path.rglob("*.npy"))  # nothing decoded
    assert_nothing_written(tmp_path)


def test_linear_checkpoint_dir_below_a_file_stops_before_the_backbone_loads(tmp_path, tiny_cifar, a_file):
    ckpt = fake_checkpoint(tmp_path / "trained_models" / "mabt" / "run")
    args = [
        "--config-name",
        "linear_cifar.yaml",
        f"pretrained_feature_extractor={ckpt.parent}",
        f"data.train_path={tiny_cifar['train']}",
        f"data.val_path={tiny_cifar['test']}",
        f"checkpoint.dir={a_file / 'linear'}",
        "accelerator=cpu",
    ]
    result = run_entry("main_linear.py", args, cwd=tmp_path)
    # an empty state_dict would be named as "does not hold this backbone's weights" had it got that far
    assert_one_line(result, 2, f"checkpoint.dir={a_file / 'linear'}", "is a file")


def test_compare_out_below_a_file_stops_before_reading_runs(tmp_path, a_file):
    result = run_entry("main_compare.py", [str(tmp_path / "no_runs_here"), "--out", str(a_file / "cmp")], cwd=tmp_path)
    assert_one_line(result, 2, f"--out {a_file / 'cmp'}", "is a file")


def deny_writes_to(monkeypatch, folder: Path) -> None:
    """``folder`` reads as not writable (the tests may run as root, who may write anywhere)."""
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: Path(path) != folder and real(path, mode, **kw))


def test_knn_into_a_run_folder_it_cannot_write_stops_before_loading(tmp_path, tiny_cifar, monkeypatch, capsys):
    """main_knn.py writes knn.csv into the run folder: checked before the checkpoint is read."""
    from mvssl_plugin.cli import knn

    ckpt = fake_checkpoint(tmp_path / "run")
    deny_writes_to(monkeypatch, ckpt.parent)
    flags = ["--pretrained_checkpoint_dir", str(ckpt.parent), "--dataset", "cifar10"]
    flags += ["--train_data_path", tiny_cifar["train"], "--val_data_path", tiny_cifar["test"], "--device", "cpu"]
    monkeypatch.setattr(sys, "argv", ["main_knn.py", *flags])
    with pytest.raises(SystemExit) as stop:
        knn.main()
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and err.count("\n") == 0, err
    assert err.startswith("mvssl config error: --pretrained_checkpoint_dir") and "not writable" in err
    assert not (ckpt.parent / "knn.csv").exists()


def test_a_folder_not_writable_or_not_creatable_is_named(tmp_path, monkeypatch):
    deny_writes_to(monkeypatch, tmp_path)
    with pytest.raises(ConfigError, match=f"x=.*: {tmp_path} is not writable"):
        check_writable_folder(tmp_path, f"x={tmp_path}")
    with pytest.raises(ConfigError, match=f"cannot be created: {tmp_path} is not writable"):
        check_writable_folder(tmp_path / "a" / "b", "x=a/b")
    check_writable_folder(tmp_path.parent / "fresh" / "deeper", "x")  # creatable: fine, and not created
    assert not (tmp_path.parent / "fresh").exists()


def test_probe_into_a_run_folder_it_cannot_write_stops_before_loading(tmp_path, tiny_cifar, monkeypatch, capsys):
    """The fast probe writes probe.json beside the checkpoint: checked before the backbone loads."""
    from mvssl_plugin.cli import linear

    ckpt = fake_checkpoint(tmp_path / "run")
    deny_writes_to(monkeypatch, ckpt.parent)
    overrides = [f"pretrained_feature_extractor={ckpt.parent}", "accelerator=cpu"]
    overrides += [f"data.train_path={tiny_cifar['train']}", f"data.val_path={tiny_cifar['test']}"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["main_linear.py", "--config-name", "probe_cifar_cpu.yaml", *overrides])
    with pytest.raises(SystemExit) as stop:
        linear.main()
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and err.count("\n") == 0, err
    assert err.startswith("mvssl config error: pretrained_feature_extractor=") and "not writable" in err
    assert not (ckpt.parent / "probe.json").exists()
