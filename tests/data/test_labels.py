"""Validation labels by class name (data/label_matching.py relabels by folder name), through the entry
points a user runs: main_pretrain.py (online validation), main_linear.py (solo-learn's linear
evaluation and the fast probe) and main_knn.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import NEEDS_DALI, assert_one_line, make_image_folder, run_entry, tiny_overrides
from omegaconf import OmegaConf

SAFE = {"+backbone.kwargs.width": 8}


pytestmark = pytest.mark.usefixtures("one_thread")


def trees(root: Path, val_classes: int = 3, per_class: int = 8, val_per_class: int = 4) -> dict:
    """A 3-class training tree and a validation tree of its first ``val_classes`` classes."""
    train = make_image_folder(root / "train", per_class=per_class)
    test = make_image_folder(root / "test", classes=val_classes, per_class=val_per_class, seed=1)
    return {"train": str(train), "test": str(test)}


def drop_class(data: dict, name: str) -> dict:
    shutil.rmtree(Path(data["test"]) / name)
    return data


def rename_class(data: dict, old: str, new: str) -> dict:
    os.rename(Path(data["test"]) / old, Path(data["test"]) / new)
    return data


def pretrain_args(data: dict, out: Path, **extra) -> list[str]:
    return ["--config-name", "mabt_cifar.yaml", *tiny_overrides(data, out, **{**SAFE, **extra})]


def linear_args(recipe: str, data: dict, out: Path, checkpoint: Path, **extra) -> list[str]:
    overrides = tiny_overrides(data, out, pretrained_feature_extractor=str(checkpoint), **{**SAFE, **extra})
    overrides = [o for o in overrides if not o.startswith(("method_kwargs", "auto_resume"))]
    return ["--config-name", recipe, *overrides]


PROBE = {"probe.epochs": 5, "probe.test_patches": 1, "probe.device": "cpu"}


def knn_args(data: dict, checkpoint: Path) -> list[str]:
    return [
        "--pretrained_checkpoint_dir", str(checkpoint), "--dataset", "cifar10", "--train_data_path", data["train"],
        "--val_data_path", data["test"], "--num_workers", "0", "--k", "1", "--temperature", "0.1",
        "--distance_function", "cosine", "--feature_type", "backbone",
    ]  # fmt: skip


def assert_ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def dropped_once(out: str, kept: int) -> bool:
    """One notice of paths reaching a file twice, leaving ``kept`` (torchvision's walk follows
    a loop until the system's symlink limit: about 40 levels, counted here, not assumed)."""
    found = re.findall(r"mvssl: \S+: (\d+) of (\d+) image paths reach a file already listed", out)
    return len(found) == 1 and int(found[0][1]) - int(found[0][0]) == kept and int(found[0][0]) > kept


def said(out: str, fragment: str) -> int:
    """How many ``mvssl: ...`` notice lines hold ``fragment``."""
    return sum(1 for line in out.splitlines() if line.startswith("mvssl: ") and fragment in line)


def test_subset_labels_are_the_training_indices_in_every_dataset(tmp_path):
    """torchvision numbers the validation tree's own sorted folders (class_1 -> 0): after
    relabelling, ``samples``, ``targets`` and the memory loader hold the training indices,
    with solo-learn's data_fraction (which subsets samples only) and data.val_fraction."""
    from solo.data.classification_dataloader import prepare_transforms

    from mvssl_plugin.data.dataset_files import dataset_labels
    from mvssl_plugin.data.inmemory.eval_loaders import val_memory_loader
    from mvssl_plugin.data.labelled_sets import classification_datasets, pretrain_val_set

    data = drop_class(trees(tmp_path, per_class=6, val_per_class=4), "class_0")
    cfg = OmegaConf.create(
        {
            "data": {"dataset": "cifar10", "train_path": data["train"], "val_path": data["test"],
                     "format": "memory", "fraction": 0.5, "no_labels": False},
            "memory": {"cache_dir": str(tmp_path / "cache")},
            "optimizer": {"batch_size": 4},
            "accelerator": "cpu",
            "seed": 0,
        }
    )  # fmt: skip
    t_train, t_val = prepare_transforms("cifar10")
    train_set, val_set = classification_datasets(cfg, t_train, t_val, cfg.data.fraction)
    expected = [train_set.class_to_idx[Path(path).parent.name] for path, _ in val_set.samples]
    assert sorted(set(expected)) == [1, 2] and len(expected) == 8
    assert dataset_labels(val_set) == expected and list(val_set.targets) == expected
    assert val_set[0][1] == expected[0]  # what a loader batch holds
    assert val_set.class_to_idx == {"class_1": 1, "class_2": 2}
    assert len(train_set.samples) == 9  # the fraction, untouched
    loader = val_memory_loader(cfg, pretrain_val_set(cfg))
    assert loader.labels.tolist() == expected
    cfg.data.val_fraction = 0.5
    subset = pretrain_val_set(cfg)
    assert sorted({val_set.targets[i] for i in subset.indices}) == [1, 2]  # stratified on the new labels


def test_knn_counts_the_classes_of_both_sets():
    """solo-learn's kNN sizes its vote table by the test set's distinct labels: a test set of
    some training classes fails there. The plugin's gives solo-learn's numbers otherwise."""
    import torch
    from solo.utils.knn import WeightedKNNClassifier

    from mvssl_plugin.eval.knn_grid import all_classes_knn

    g = torch.Generator().manual_seed(0)
    train_x, train_y = torch.randn(90, 8, generator=g), torch.arange(90) % 3
    test_x, test_y = torch.randn(30, 8, generator=g), torch.arange(30) % 3
    for distance in ("cosine", "euclidean"):
        ours, solos = all_classes_knn(5, 0.1, distance), WeightedKNNClassifier(k=5, T=0.1, distance_fx=distance)
        for knn in (ours, solos):
            knn.update(train_features=train_x, train_targets=train_y, test_features=test_x, test_targets=test_y)
        assert [float(a) for a in ours.compute()] == [float(a) for a in solos.compute()]
    subset = test_y > 0  # classes 1 and 2 of 0, 1, 2
    ours, solos = all_classes_knn(5, 0.1, "cosine"), WeightedKNNClassifier(k=5, T=0.1)
    for knn in (ours, solos):
        knn.update(
            train_features=train_x, train_targets=train_y, test_features=test_x[subset], test_targets=test_y[subset]
        )
    assert 0 <= float(ours.compute()[0]) <= 100
    with pytest.raises(RuntimeError, match="out of bounds"):
        solos.compute()


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory) -> dict:
    """One tiny pretraining run whose validation tree holds 2 of the 3 training classes and
    whose training tree has a symlink loop: its output, and the run folder (a checkpoint)
    the evaluation tests read, never change."""
    root = tmp_path_factory.mktemp("labels")
    data = drop_class(trees(root), "class_0")
    (Path(data["train"]) / "class_1" / "loop").symlink_to(".", target_is_directory=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        result = run_entry("main_pretrain.py", pretrain_args(data, root / "runs"), root)
    out = assert_ok(result)
    (run_dir,) = (root / "runs" / "mabt").iterdir()
    return {"out": out, "run": run_dir}


@pytest.mark.slow
def test_pretraining_on_a_subset_of_classes_and_a_symlink_loop(pretrained):
    out = pretrained["out"]
    assert said(out, "data.val_path has 2 of the 3 classes of data.train_path (none of ['class_0'])") == 1
    assert said(out, "evaluating on those 2, labelled by folder name") == 1
    # class_1/loop -> . : torchvision's walk lists class_1 43 times; each file is read once
    assert dropped_once(out, kept=24) and said(out, "class_1/loop (a symlink loop)") == 1
    assert "image_folder: 24 images of " in out
    assert "hold images in sub-folders" not in out
    assert re.search(r"mvssl: epoch 0 val_acc1=", out)


@pytest.mark.slow
def test_pretraining_stops_on_a_validation_class_the_training_set_lacks(tmp_path):
    data = rename_class(trees(tmp_path), "class_2", "class_9")
    result = run_entry("main_pretrain.py", pretrain_args(data, tmp_path / "runs"), tmp_path)
    assert_one_line(
        result,
        2,
        "mvssl config error: data.val_path: class folder(s) ['class_9'] are not classes of data.train_path",
        "(its classes: ['class_0', 'class_1', 'class_2'])",
        "rename those folders",
    )
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["linear_cifar.yaml", "probe_cifar.yaml"])
def test_evaluations_stop_on_a_validation_class_the_training_set_lacks(recipe, pretrained, tmp_path):
    data = rename_class(trees(tmp_path), "class_0", "airplane")
    extra = PROBE if recipe.startswith("probe") else {}
    result = run_entry("main_linear.py", linear_args(recipe, data, tmp_path, pretrained["run"], **extra), tmp_path)
    assert_one_line(result, 2, "data.val_path: class folder(s) ['airplane'] are not classes of data.train_path")
    assert not (tmp_path / "linear").exists()


@pytest.mark.slow
def test_knn_stops_on_a_validation_class_the_training_set_lacks(pretrained, tmp_path):
    data = rename_class(trees(tmp_path), "class_1", "cat")
    result = run_entry("main_knn.py", knn_args(data, pretrained["run"]), tmp_path)
    assert_one_line(result, 2, "--val_data_path: class folder(s) ['cat'] are not classes of --train_data_path")


@pytest.mark.slow
def test_probe_and_knn_on_a_subset_of_classes_with_a_symlink_loop(pretrained, tmp_path):
    """Both sets are read once each (the probe reads the test set twice, plain and
    augmented); a loop in the test set is dropped with one notice."""
    data = drop_class(trees(tmp_path), "class_1")
    (Path(data["test"]) / "class_2" / "loop").symlink_to(".", target_is_directory=True)
    run = shutil.copytree(pretrained["run"], tmp_path / "run")
    probe = assert_ok(
        run_entry("main_linear.py", linear_args("probe_cifar.yaml", data, tmp_path, run, **PROBE), tmp_path)
    )
    knn = assert_ok(run_entry("main_knn.py", knn_args(data, run), tmp_path))
    for out in (probe, knn):
        assert said(out, "has 2 of the 3 classes of") == 1 and said(out, "(none of ['class_1'])") == 1
        assert dropped_once(out, kept=8) and said(out, "class_2/loop (a symlink loop)") == 1
    report = json.loads((run / "probe.json").read_text())
    assert report["test_images"] == 8 and report["train_images"] == 24


@pytest.mark.slow
def test_linear_evaluation_on_a_subset_of_classes(pretrained, tmp_path):
    data = drop_class(trees(tmp_path), "class_2")
    run = shutil.copytree(pretrained["run"], tmp_path / "run")
    extra = {"+limit_train_batches": 1, "checkpoint.enabled": False}
    out = assert_ok(
        run_entry("main_linear.py", linear_args("linear_cifar.yaml", data, tmp_path, run, **extra), tmp_path)
    )
    assert said(out, "data.val_path has 2 of the 3 classes of data.train_path (none of ['class_2'])") == 1


@pytest.mark.slow
@pytest.mark.parametrize("data_format", [pytest.param("dali", marks=NEEDS_DALI), "memory"])
def test_symlink_loop_counted_once_in_every_format(data_format, tmp_path):
    data = trees(tmp_path)
    (Path(data["train"]) / "class_0" / "loop").symlink_to(".", target_is_directory=True)
    extra = {"data.format": data_format, "data.val_path": "null", "checkpoint.enabled": False}
    out = assert_ok(run_entry("main_pretrain.py", pretrain_args(data, tmp_path / "runs", **extra), tmp_path))
    assert dropped_once(out, kept=24) and said(out, "class_0/loop (a symlink loop)") == 1
    assert re.search(rf"data +{data_format}\b.*: 24 images of ", out)


def test_a_val_fraction_too_small_for_its_classes_is_named_with_the_range_that_works():
    from mvssl_plugin.data.label_matching import stratified_subset
    from mvssl_plugin.errors import ConfigError

    class Labelled:
        targets = [0, 1, 2] * 4  # 12 images, 3 classes

    with pytest.raises(
        ConfigError, match=r"data.val_fraction=0.1 keeps 1 of 12 images in 3 classes.*between 0.25 and 0.75"
    ):
        stratified_subset(Labelled(), 0.1)
    assert len(stratified_subset(Labelled(), 0.5).indices) == 6
