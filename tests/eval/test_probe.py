"""The fast linear probe (eval/probe.py, eval/fast_probe.py): on separable features, and
through ``main_linear.py`` with ``probe_cifar.yaml`` on a finished tiny run."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import run_entry, tiny_overrides

from mvssl_plugin.eval.probe import ProbeSettings, patch_accuracy, train_probe


def test_probe_learns_separable_features_and_averages_patches():
    torch.manual_seed(0)
    centers = torch.randn(4, 16) * 4
    labels = torch.arange(4).repeat(50)
    train = centers[labels] + torch.randn(200, 16)
    probe = train_probe(train, labels, 4, ProbeSettings(epochs=30, batch_size=64, lr=1e-2))
    patches = centers[labels][None] + torch.randn(3, 200, 16)  # 3 noisy patches of each image
    acc1, acc5 = patch_accuracy(probe, patches, labels)
    assert acc1 > 95 and acc5 == 100
    scrambled, _ = patch_accuracy(probe, patches, labels.roll(1))
    assert scrambled < 10


@pytest.mark.slow
def test_fast_probe_through_main_linear(two_finished_runs, tiny_cifar, tmp_path):
    overrides = tiny_overrides(
        tiny_cifar,
        tmp_path,
        pretrained_feature_extractor=str(two_finished_runs["mabt"]),
        **{"probe.epochs": 20, "probe.test_patches": 2, "probe.train_patches": 2, "probe.device": "cpu"},
    )
    overrides = [o for o in overrides if not o.startswith(("method_kwargs", "auto_resume"))]
    result = run_entry("main_linear.py", ["--config-name", "probe_cifar.yaml", *overrides], cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((two_finished_runs["mabt"] / "probe.json").read_text())
    assert report["train_images"] == 24 and report["test_images"] == 12
    assert report["train_features"] == 48  # 2 patches of each training image
    assert 0 <= report["acc1"] <= 100 and 0 <= report["acc1_2patches"] <= 100
    assert "mvssl probe: top-1" in result.stdout


@pytest.mark.slow
def test_fast_probe_reads_the_memory_format(two_finished_runs, tiny_cifar, tmp_path):
    """data.format=memory: the same files, decoded once (the cache beside each data path)
    and transformed as solo-learn's linear-eval transforms do, on the probe's device."""
    overrides = tiny_overrides(
        tiny_cifar,
        tmp_path,
        pretrained_feature_extractor=str(two_finished_runs["mabt"]),
        **{"probe.epochs": 20, "probe.test_patches": 2, "probe.train_patches": 2, "probe.device": "cpu"},
    )
    overrides = [o for o in overrides if not o.startswith(("method_kwargs", "auto_resume", "data.format"))]
    cache = tmp_path / "cache"
    args = ["--config-name", "probe_cifar.yaml", *overrides, "data.format=memory", f"++memory.cache_dir={cache}"]
    result = run_entry("main_linear.py", args, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((two_finished_runs["mabt"] / "probe.json").read_text())
    assert report["data_format"] == "memory"
    assert report["train_images"] == 24 and report["test_images"] == 12 and report["train_features"] == 48
    assert 0 <= report["acc1"] <= 100 and 0 <= report["acc1_2patches"] <= 100
    assert len(list(cache.glob("*.npy"))) == 2  # train and test sets, read back by the next probe
    assert "reads its images with torchvision" not in result.stdout


@pytest.mark.slow
def test_probe_rejects_bad_keys(two_finished_runs, tiny_cifar, tmp_path):
    overrides = tiny_overrides(
        tiny_cifar, tmp_path, pretrained_feature_extractor=str(two_finished_runs["mabt"]), **{"probe.epochs": 0}
    )
    overrides = [o for o in overrides if not o.startswith(("method_kwargs", "auto_resume"))]
    result = run_entry("main_linear.py", ["--config-name", "probe_cifar.yaml", *overrides], cwd=tmp_path)
    assert result.returncode == 2 and "probe.epochs=0" in result.stderr
