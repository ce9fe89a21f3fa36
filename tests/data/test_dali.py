"""The DALI m-view pipeline on the CPU: views, normalization, file/label alignment,
sharding, fractions, the entry point, and bad files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import has_dali, make_image_folder, run_entry, tiny_overrides
from PIL import Image

from mvssl_plugin.cli.config_name import compose_recipe
from mvssl_plugin.data.dali import DaliMultiViewLoader, EpochShards, ViewRecipe
from mvssl_plugin.data.pretrain_set import pretrain_dataset, pretrain_samples
from mvssl_plugin.data.transforms import pretrain_transform
from mvssl_plugin.errors import ConfigError, DataError
from mvssl_plugin.train.pretrain import pretrain

pytestmark = pytest.mark.skipif(not has_dali(), reason="the dali extra is not installed")

CLASSES, PER_CLASS = 3, 8


def solid_color(c: int, i: int) -> tuple[int, int, int]:
    """A colour that names its file: red = image, green = class (spaced for JPEG's rounding)."""
    return 16 + 24 * i, 40 + 80 * c, 128


@pytest.fixture(scope="module")
def solid_folder(tmp_path_factory) -> Path:
    """Uniform-colour JPEGs: every pixel of every view tells which file it was cut from."""
    root = tmp_path_factory.mktemp("solid") / "train"
    for c in range(CLASSES):
        (root / f"class_{c}").mkdir(parents=True)
        for i in range(PER_CLASS):
            Image.new("RGB", (40, 40), solid_color(c, i)).save(root / f"class_{c}" / f"{i:02d}.jpg", quality=100)
    return root


def recipe_cfg(data: dict, out: Path, recipe: str = "mabt_cifar.yaml", **extra):
    return compose_recipe(recipe, "pretrain", tiny_overrides(data, out, **{"data.format": "dali", **extra}))


def loader_for(cfg, files, targets, **kwargs) -> DaliMultiViewLoader:
    recipes = [ViewRecipe.from_cfg(cfg.data.dataset, aug) for aug in cfg.augmentations]
    return DaliMultiViewLoader(files, targets, recipes, batch_size=int(cfg.optimizer.batch_size), **kwargs)


def no_color_change(cfg) -> None:
    for aug in cfg.augmentations:
        aug.color_jitter.prob = aug.grayscale.prob = aug.solarization.prob = aug.gaussian_blur.prob = 0.0


def test_views_shapes_dtype_and_mixed_resolution(tiny_cifar, tmp_path):
    cfg = recipe_cfg(
        tiny_cifar, tmp_path, "mabt_cifar_multicrop.yaml", **{"data.num_views": 5, "data.num_small_views": 3}
    )
    files, targets = pretrain_samples(cfg)
    loader = loader_for(cfg, files, targets)
    assert len(loader) == 24 // 8
    batches = list(loader)
    assert len(batches) == 3
    indexes, views, labels = batches[0]
    assert [tuple(v.shape) for v in views] == [(8, 3, 32, 32)] * 2 + [(8, 3, 16, 16)] * 3
    assert all(v.dtype == torch.float32 for v in views)
    assert indexes.dtype == labels.dtype == torch.int64 and indexes.shape == labels.shape == (8,)


def test_normalization_and_labels_match_the_files(solid_folder, tiny_cifar, tmp_path):
    """Each view's colour, un-normalized with solo-learn's CIFAR mean/std, is the colour of
    the file its index names, and its label that file's class."""
    data = dict(tiny_cifar, train=str(solid_folder))
    cfg = recipe_cfg(data, tmp_path)
    no_color_change(cfg)
    files, targets = pretrain_samples(cfg)
    mean = torch.tensor([0.4914, 0.4822, 0.4465]).view(3, 1, 1)
    std = torch.tensor([0.2470, 0.2435, 0.2616]).view(3, 1, 1)
    seen = []
    for indexes, views, labels in loader_for(cfg, files, targets):
        for k, index in enumerate(indexes.tolist()):
            path = Path(files[index])
            c, i = int(path.parent.name.split("_")[1]), int(path.stem)
            assert labels[k].item() == c == targets[index]
            for view in views:
                rgb = (view[k] * std + mean) * 255
                assert torch.allclose(rgb, torch.tensor(solid_color(c, i), dtype=torch.float32).view(3, 1, 1), atol=3)
        seen += indexes.tolist()
    assert sorted(seen) == list(range(CLASSES * PER_CLASS)), "one epoch visits every image once"


def test_views_of_one_image_differ_and_epochs_reshuffle(tiny_cifar, tmp_path):
    cfg = recipe_cfg(tiny_cifar, tmp_path)
    loader = loader_for(cfg, *pretrain_samples(cfg))
    indexes, views, _ = next(iter(loader))
    for a in range(len(views)):
        for b in range(a + 1, len(views)):
            per_image = (views[a] - views[b]).flatten(1).abs().amax(dim=1)
            assert (per_image > 0.1).all(), f"views {a} and {b} coincide for some image"
    again, views_again, _ = next(iter(loader))
    assert torch.equal(indexes, again) and torch.equal(views[0], views_again[0]), "an epoch is reproducible"
    loader.sampler.set_epoch(1)
    other, views_other, _ = next(iter(loader))
    assert not torch.equal(indexes, other) and not torch.equal(views[0], views_other[0])


def test_rrc_off_resizes_and_grayscale_makes_equal_channels(solid_folder, tiny_cifar, tmp_path):
    cfg = recipe_cfg(dict(tiny_cifar, train=str(make_image_folder(tmp_path / "rnd", per_class=8, size=48))), tmp_path)
    no_color_change(cfg)
    cfg.augmentations[0].rrc.enabled = False
    cfg.augmentations[0].grayscale.prob = 1.0
    cfg.augmentations[0].horizontal_flip.prob = 0.0
    loader = loader_for(cfg, *pretrain_samples(cfg))
    _, views, _ = next(iter(loader))
    mean = torch.tensor([0.4914, 0.4822, 0.4465]).view(1, 3, 1, 1)
    std = torch.tensor([0.2470, 0.2435, 0.2616]).view(1, 3, 1, 1)
    rgb = views[0] * std + mean
    assert views[0].shape[-2:] == (32, 32)
    assert (rgb[:, 0] - rgb[:, 1]).abs().max() < 2 / 255 and (rgb[:, 1] - rgb[:, 2]).abs().max() < 2 / 255
    assert torch.equal(views[0], views[1]), "no random step is left: every view is the resized image"


def test_epoch_shards_partition_like_distributed_sampler():
    shards = EpochShards(num_samples=25, seed=3)
    parts = [shards.indices(rank, 2) for rank in range(2)]
    assert len(parts[0]) == len(parts[1]) == 12
    assert not set(parts[0]) & set(parts[1])
    shards.set_epoch(1)
    assert not np.array_equal(shards.indices(0, 2), parts[0])
    shards.set_epoch(0)
    assert np.array_equal(shards.indices(0, 2), parts[0])


def test_fraction_takes_the_torchvision_paths_files(tmp_path):
    data = {"train": str(make_image_folder(tmp_path / "train", classes=4, per_class=10)), "test": None}
    cfg = recipe_cfg(data, tmp_path, **{"data.fraction": 0.5, "data.val_path": "null"})
    files, targets = pretrain_samples(cfg)
    assert len(files) == 20 and np.bincount(targets).tolist() == [5, 5, 5, 5]
    torchvision_cfg = recipe_cfg(data, tmp_path, **{"data.fraction": 0.5, "data.val_path": "null"})
    torchvision_cfg.data.format = "image_folder"
    torchvision_files = [path for path, _ in pretrain_dataset(torchvision_cfg, pretrain_transform(cfg)).samples]
    assert files == torchvision_files
    seen = [i for indexes, _, _ in loader_for(cfg, files, targets) for i in indexes.tolist()]
    assert len(seen) == 16 and set(seen) <= set(range(20))  # 2 full batches of 8, drop_last


@pytest.mark.slow
def test_mabt_recipe_with_dali_pretrains_through_the_entry_point(tiny_cifar, tmp_path):
    overrides = tiny_overrides(tiny_cifar, tmp_path, **{"data.format": "dali", "max_epochs": 2})
    result = run_entry("main_pretrain.py", ["--config-name", "mabt_cifar.yaml", *overrides], cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run_dir,) = (tmp_path / "mabt").iterdir()
    args = json.loads((run_dir / "args.json").read_text())
    assert args["data"]["format"] == "dali" and args["dali"]["device"] == "cpu"
    state = torch.load(next(run_dir.glob("*ep=1.ckpt")), map_location="cpu", weights_only=False)
    assert state["global_step"] == 6  # 24 images, batch 8: 3 steps an epoch
    assert "mvssl: epoch 1" in result.stdout


def test_solo_learns_barlow_twins_trains_on_dali_views(tiny_cifar, tmp_path):
    cfg = compose_recipe(
        "mabt_cifar_2views_d8192.yaml",
        "pretrain",
        tiny_overrides(tiny_cifar, tmp_path, method="barlow_twins", **{"data.format": "dali"}),
    )
    trainer = pretrain(cfg)
    assert trainer.global_step == 3 and torch.isfinite(trainer.callback_metrics["train_barlow_loss"])


def test_imagenet100_recipes_read_with_dali():
    for recipe in ("mabt_imagenet100.yaml", "mavicreg_imagenet100.yaml"):
        assert compose_recipe(recipe, "pretrain").data.format == "dali"


def write_bad_file(folder: Path, kind: str) -> Path:
    target = folder / "class_1" / "zz_bad.jpg"
    if kind == "garbage":
        target.write_bytes(b"this is not an image" * 10)
    else:
        good = (folder / "class_1" / "0000.jpg").read_bytes()
        target.write_bytes(good[: len(good) // 2])
    return target


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["garbage", "truncated"])
def test_corrupt_file_is_named_and_the_run_exits(kind, tmp_path):
    train = make_image_folder(tmp_path / "train", per_class=8)
    bad = write_bad_file(train, kind)
    data = {"train": str(train), "test": str(make_image_folder(tmp_path / "test", per_class=2))}
    overrides = tiny_overrides(data, tmp_path / "runs", **{"data.format": "dali"})
    result = run_entry("main_pretrain.py", ["--config-name", "mabt_cifar.yaml", *overrides], cwd=tmp_path, timeout=120)
    assert result.returncode == 4, result.stdout[-2000:] + result.stderr[-2000:]
    # the header scan finds it before DALI reads anything (DALI's own decode guard: the test below)
    assert f"mvssl data error: data.train_path: 1 of 25 image files cannot be used: {bad}" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_corrupt_file_raises_data_error_from_the_loader(tiny_cifar, tmp_path):
    train = make_image_folder(tmp_path / "train", per_class=8)
    bad = write_bad_file(train, "garbage")
    cfg = recipe_cfg(dict(tiny_cifar, train=str(train)), tmp_path)
    with pytest.raises(DataError, match=str(bad)):
        list(loader_for(cfg, *pretrain_samples(cfg)))


@pytest.mark.parametrize("data_format", ["dali", "image_folder"])
def test_empty_class_folder_is_named(data_format, tiny_cifar, tmp_path):
    train = make_image_folder(tmp_path / "train", per_class=8)
    (train / "class_9").mkdir()
    (train / "class_9" / "notes.txt").write_text("no images here")
    cfg = compose_recipe(
        "mabt_cifar.yaml",
        "pretrain",
        tiny_overrides(dict(tiny_cifar, train=str(train)), tmp_path / "runs", **{"data.format": data_format}),
    )
    with pytest.raises(ConfigError, match=r"class folder\(s\) \['class_9'\] hold no images"):
        pretrain(cfg)
    assert not (tmp_path / "runs").exists()


def test_dali_needs_an_image_folder_tree(tmp_path, tiny_cifar):
    (tmp_path / "cifar-10-batches-py").mkdir()  # torchvision's CIFAR files, which DALI cannot read
    cfg = recipe_cfg(dict(tiny_cifar, train=str(tmp_path)), tmp_path / "runs")
    with pytest.raises(ConfigError, match="torchvision's cifar10 archive, which data.format=dali cannot read"):
        pretrain(cfg)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_gpu_decoding_without_a_gpu(tiny_cifar, tmp_path):
    cfg = recipe_cfg(tiny_cifar, tmp_path, **{"dali.device": "gpu"})
    with pytest.raises(ConfigError, match="dali.device=gpu needs a CUDA GPU"):
        pretrain(cfg)
