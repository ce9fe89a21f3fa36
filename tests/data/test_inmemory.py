"""data.format=memory on the CPU: views, normalization, order per epoch and process, the
statistics of views against solo-learn's torchvision pipeline, the decode cache, bad
files, and the memory check. Tiny generated images only (seconds)."""

from __future__ import annotations

import dataclasses
import os
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from PIL import Image

import mvssl_plugin.data.inmemory.augment as memory_augment
import mvssl_plugin.data.inmemory.cache as memory_cache
import mvssl_plugin.data.inmemory.eval_loaders as memory_eval
import mvssl_plugin.data.inmemory.loader as memory_loader
from mvssl_plugin.data.inmemory.augment import BatchAugment, seeded_views
from mvssl_plugin.data.inmemory.cache import check_fits, decode_to_uint8, memory_bytes_needed
from mvssl_plugin.data.inmemory.color import shift_hue
from mvssl_plugin.data.inmemory.eval_loaders import MemoryEvalLoader, probe_memory_loaders, probe_recipes
from mvssl_plugin.data.inmemory.loader import MemoryMultiViewLoader
from mvssl_plugin.data.inmemory.pretrain import describe_ramp, pretrain_memory_loader
from mvssl_plugin.data.pipeline import ViewRecipe
from mvssl_plugin.data.resolution import ResolutionRamp
from mvssl_plugin.errors import ConfigError, DataError

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One torch thread: on a CPU shared with other jobs, every parallel op of a second
    thread can wait a whole scheduler slice (seconds over this module instead of ms)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def cifar_recipe(**changes) -> ViewRecipe:
    """mabt_cifar.yaml's augmentation, changed where asked."""
    base = ViewRecipe(
        crop_size=32,
        num_crops=2,
        rrc=True,
        scale=(0.08, 1.0),
        jitter_prob=0.8,
        brightness=0.4,
        contrast=0.4,
        saturation=0.2,
        hue=0.1,
        grayscale_prob=0.2,
        blur_prob=0.0,
        solarization_prob=0.0,
        equalization_prob=0.0,
        flip_prob=0.5,
        mean=CIFAR_MEAN,
        std=CIFAR_STD,
    )
    return dataclasses.replace(base, **changes)


NO_COLOUR = dict(jitter_prob=0.0, grayscale_prob=0.0, blur_prob=0.0, solarization_prob=0.0, equalization_prob=0.0)


def random_images(n: int, size: int = 32, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, (n, 3, size, size), dtype=np.uint8))


def loader(n: int = 24, batch: int = 8, **kwargs) -> MemoryMultiViewLoader:
    kwargs.setdefault("recipes", [cifar_recipe()])
    return MemoryMultiViewLoader(random_images(n), torch.arange(n) % 3, batch_size=batch, **kwargs)


def indexes_of(batches) -> list[int]:
    return [i for index, _, _ in batches for i in index.tolist()]


# ----------------------------------------------------------------------------------------
# Views


def test_views_shapes_dtype_and_mixed_resolution():
    recipes = [cifar_recipe(num_crops=2), cifar_recipe(crop_size=16, num_crops=3, scale=(0.05, 0.14))]
    data = loader(n=26, recipes=recipes)
    assert len(data) == 3  # drop_last
    batches = list(data)
    assert len(batches) == 3
    index, views, targets = batches[0]
    assert [tuple(v.shape) for v in views] == [(8, 3, 32, 32)] * 2 + [(8, 3, 16, 16)] * 3
    assert all(v.dtype == torch.float32 for v in views)
    assert index.dtype == targets.dtype == torch.int64 and index.shape == targets.shape == (8,)
    assert torch.equal(targets, index % 3)


def test_resolution_ramp_cuts_each_epochs_views_at_its_side_and_scales_small_views():
    recipes = [cifar_recipe(num_crops=2), cifar_recipe(crop_size=16, num_crops=1, scale=(0.05, 0.14))]
    data = loader(n=16, recipes=recipes, resolution=ResolutionRamp(start=16, full=32), epochs=3)
    shapes = []
    for epoch in range(3):
        data.sampler.set_epoch(epoch)
        shapes.append([tuple(v.shape[-2:]) for v in next(iter(data))[1]])
    assert shapes == [[(16, 16)] * 2 + [(8, 8)], [(24, 24)] * 2 + [(12, 12)], [(32, 32)] * 2 + [(16, 16)]]
    # the last epoch is the loader without a ramp, view for view (a resumed epoch is cut the same)
    plain = loader(n=16, recipes=recipes)
    plain.sampler.set_epoch(2)
    for ours, theirs in zip(next(iter(data))[1], next(iter(plain))[1]):
        assert torch.equal(ours, theirs)
    with pytest.raises(ValueError, match="needs the run's epochs"):
        loader(resolution=ResolutionRamp(start=16, full=32))
    with pytest.raises(ValueError, match="ends at 24 px, the largest recipe is 32 px"):
        loader(recipes=recipes, resolution=ResolutionRamp(start=16, full=24), epochs=3)


def test_the_augmentations_magnitude_grows_with_the_side_and_the_last_epoch_is_the_recipes():
    recipes = [cifar_recipe(num_crops=2), cifar_recipe(crop_size=16, num_crops=1, scale=(0.05, 0.14))]
    ramp = ResolutionRamp(start=16, full=32, strength_start=0.0)
    data = loader(n=16, recipes=recipes, resolution=ramp, epochs=3)
    first, middle, last = (data.augments_at(epoch) for epoch in range(3))
    # epoch 0, 16 px: no jitter amplitude, only the largest crops; the small views scale alike
    large, small = (augment.recipe for augment, _ in first)
    assert (large.crop_size, large.scale, large.brightness, large.hue) == (16, (1.0, 1.0), 0.0, 0.0)
    assert (small.crop_size, small.scale, small.saturation) == (8, (0.14, 0.14), 0.0)
    # epoch 1, 24 px: half the way, so half the magnitude (cifar_recipe: brightness 0.4, crops 0.08-1)
    large = middle[0][0].recipe
    assert (large.crop_size, large.brightness) == (24, pytest.approx(0.2)) and large.scale == pytest.approx((0.54, 1.0))
    assert last is data.augments  # the full side: the recipe as the YAML says
    # a magnitude of 0 leaves each colour as it was (grayscale off); the full side's jitter does not
    colours = torch.from_numpy(np.random.default_rng(3).integers(0, 256, (16, 3, 1, 1), dtype=np.uint8))
    solid = MemoryMultiViewLoader(
        colours.expand(16, 3, 32, 32).contiguous(), torch.zeros(16), [cifar_recipe(grayscale_prob=0.0)], 8,
        resolution=ramp, epochs=3,
    )  # fmt: skip
    mean, std = torch.tensor(CIFAR_MEAN).view(1, 3), torch.tensor(CIFAR_STD).view(1, 3)
    for epoch, unchanged in ((0, True), (2, False)):
        solid.sampler.set_epoch(epoch)
        index, views, _ = next(iter(solid))
        expected = (colours[index].view(8, 3).float() / 255 - mean) / std
        assert all(torch.allclose(v, expected.view(8, 3, 1, 1).expand_as(v), atol=1e-5) == unchanged for v in views)


def test_the_start_line_says_each_side_and_its_magnitude_only_when_it_moves():
    plain, gentle = ResolutionRamp(start=16, full=32), ResolutionRamp(start=16, full=32, strength_start=0.25)
    assert describe_ramp(plain, 5) == (
        "views grow from 16 to 32 px (memory.resolution): 16 px in epoch 0, 24 px in epochs 1-2, 32 px in epochs 3-4"
    )
    assert describe_ramp(gentle, 2).endswith(
        "16 px at 0.25 of the augmentation in epoch 0, 32 px at 1.00 of the augmentation in epoch 1"
    )


def test_normalization_is_exact_on_solid_colours():
    """A crop of a solid image is that colour; un-augmented, the view is (c / 255 - mean) / std."""
    colours = torch.tensor([[16, 120, 250], [0, 255, 128], [77, 3, 200]], dtype=torch.uint8)
    images = colours.view(3, 3, 1, 1).expand(3, 3, 20, 28).contiguous()
    augment = BatchAugment(cifar_recipe(**NO_COLOUR))
    views = seeded_views([(augment, 4)], images, seed=5)
    mean, std = torch.tensor(CIFAR_MEAN).view(1, 3, 1, 1), torch.tensor(CIFAR_STD).view(1, 3, 1, 1)
    expected = ((colours.float() / 255).view(3, 3, 1, 1) - mean) / std
    for view in views:
        assert torch.allclose(view, expected.expand_as(view), atol=1e-6)


def test_crop_is_pils_crop_and_resize(monkeypatch):
    """The matrices cut and resize as PIL does (torchvision's resized_crop on a PIL image)."""
    image = np.random.default_rng(1).integers(0, 256, (40, 36, 3), dtype=np.uint8)
    for top, left, h, w, size in [(3, 5, 10, 14, 32), (2, 1, 38, 30, 16), (0, 0, 40, 36, 24)]:
        pil = Image.fromarray(image).crop((left, top, left + w, top + h)).resize((size, size), Image.BICUBIC)
        augment = BatchAugment(cifar_recipe(crop_size=size, flip_prob=0.0, **NO_COLOUR))
        boxes = tuple(torch.tensor([float(v)]) for v in (top, left, h, w))
        monkeypatch.setattr(memory_augment, "random_resized_boxes", lambda *args, **kwargs: boxes)
        ours = augment.crop_and_flip(torch.from_numpy(image).permute(2, 0, 1)[None])
        difference = (ours[0].permute(1, 2, 0) * 255 - torch.from_numpy(np.asarray(pil)).float()).abs()
        assert difference.max() <= 1.0 + 1e-4 and (difference > 0.5).float().mean() < 0.01


def test_resize_and_centre_crop_without_rrc_is_torchvisions():
    """rrc disabled: torchvision's Resize(crop) (shorter side) + a centre crop, on a non-square image."""
    from torchvision import transforms

    image = np.random.default_rng(2).integers(0, 256, (20, 28, 3), dtype=np.uint8)
    reference = transforms.Compose(
        [
            transforms.Resize(16, interpolation=transforms.InterpolationMode.BICUBIC),
            transforms.CenterCrop(16),
            transforms.PILToTensor(),
        ]
    )(Image.fromarray(image))
    augment = BatchAugment(cifar_recipe(crop_size=16, rrc=False, flip_prob=0.0, **NO_COLOUR))
    ours = augment.crop_and_flip(torch.from_numpy(image).permute(2, 0, 1)[None].contiguous())[0] * 255
    assert (ours - reference.float()).abs().max() <= 1.0


def test_hue_shift_is_torchvisions():
    import torchvision.transforms.functional as F

    images = torch.rand(16, 3, 8, 8)
    images[:, :, 0] = images[:, :1, 0]  # grey pixels
    images[:, 1, 1] = images[:, 0, 1]  # red and green tie
    turns = torch.linspace(-0.5, 0.5, 16)
    expected = torch.stack([F.adjust_hue(image, float(turn)) for image, turn in zip(images, turns)])
    assert torch.allclose(shift_hue(images, turns), expected, atol=1e-5)


def test_blur_solarization_and_equalization_run_and_solarize_as_pil():
    recipe = cifar_recipe(crop_size=16, **dict(NO_COLOUR, solarization_prob=1.0))
    colours = torch.tensor([[0, 127, 128], [200, 30, 255]], dtype=torch.uint8)
    solid = colours.view(2, 3, 1, 1).expand(2, 3, 24, 24).contiguous()
    view = seeded_views([(BatchAugment(recipe), 1)], solid, seed=0)[0]
    mean, std = torch.tensor(CIFAR_MEAN).view(1, 3, 1, 1), torch.tensor(CIFAR_STD).view(1, 3, 1, 1)
    solarized = torch.where(colours >= 128, 255 - colours, colours).float().view(2, 3, 1, 1) / 255
    assert torch.allclose(view * std + mean, solarized.expand_as(view), atol=1e-5)
    everything = cifar_recipe(crop_size=16, blur_prob=1.0, solarization_prob=0.5, equalization_prob=0.5)
    views = seeded_views([(BatchAugment(everything), 2)], random_images(6, 24), seed=1)
    assert [tuple(v.shape) for v in views] == [(6, 3, 16, 16)] * 2 and all(torch.isfinite(v).all() for v in views)


def test_blur_smooths_the_images_it_draws_and_leaves_the_others():
    """The same seed cuts the same crops with and without blur (every draw before it is the
    same): at p = 1 the views are smoother (less total variation; none rougher), at p = 0.5
    some are and the rest are the unblurred views exactly."""
    images = random_images(32, 24)

    def views(p: float) -> torch.Tensor:
        recipe = cifar_recipe(crop_size=16, **dict(NO_COLOUR, blur_prob=p))
        return seeded_views([(BatchAugment(recipe), 1)], images, seed=3)[0]

    def variation(x: torch.Tensor) -> torch.Tensor:
        return (x.diff(dim=2).abs().mean((1, 2, 3)) + x.diff(dim=3).abs().mean((1, 2, 3))).double()

    sharp, blurred, half = views(0.0), views(1.0), views(0.5)
    assert (variation(blurred) <= variation(sharp) + 1e-6).all()  # sigma 0.1 px barely blurs
    assert variation(blurred).mean() < 0.7 * variation(sharp).mean()
    kept = torch.tensor([torch.equal(a, b) for a, b in zip(half, sharp)])
    assert 4 < int(kept.sum()) < 28  # p = 0.5 of 32 images
    assert (variation(half[~kept]) <= variation(sharp[~kept]) + 1e-6).all()
    assert variation(half[~kept]).mean() < 0.7 * variation(sharp[~kept]).mean()


def test_views_read_no_value_back_from_their_device():
    """Every random choice is drawn on the CPU and sent to the images' device, so cutting
    views never reads a device tensor back: on a GPU such a read (``nonzero``, a boolean
    mask, ``.item()``) stops the host until the GPU has caught up, at every step, and the
    views cut ahead no longer overlap training. Meta tensors hold no values: any such read
    raises on them."""
    from kornia.enhance import equalize

    try:  # kornia 0.8 (0.8.3, pip's pick under torch < 2.5.1) equalizes channel by channel with .item()
        equalize(torch.empty(1, 3, 8, 8, device="meta"))
        equalization = 0.5
    except RuntimeError:  # reads back there: the rest is still checked
        equalization = 0.0
    everything = cifar_recipe(blur_prob=0.5, solarization_prob=0.5, equalization_prob=equalization)
    data = MemoryMultiViewLoader(
        random_images(16), torch.arange(16) % 3, [everything, cifar_recipe(crop_size=16)], 8, "meta", prefetch=True
    )
    batches = list(data)
    assert len(batches) == 2
    for _, views, targets in batches:
        assert [tuple(v.shape) for v in views] == [(8, 3, 32, 32)] * 2 + [(8, 3, 16, 16)] * 2
        assert all(v.device.type == "meta" for v in views) and targets.device.type == "cpu"


def test_the_host_kernel_blur_is_kornias_gaussian_blur():
    """Where kornia (0.8) would read sigma back from the device, the blur makes its kernels on
    the CPU (:func:`blur_with_host_kernels`): the same images as kornia's ``gaussian_blur2d``."""
    import kornia
    from kornia.filters import gaussian_blur2d

    from mvssl_plugin.data.inmemory.color import blur_with_host_kernels, kornia_blur_checks_sigma_on_host

    images, sigma = torch.rand(4, 3, 32, 32), torch.tensor([0.1, 0.5, 1.0, 2.0])
    expected = gaussian_blur2d(images, (23, 23), sigma.unsqueeze(1).expand(-1, 2), "reflect")
    assert torch.allclose(blur_with_host_kernels(images.clone(), sigma), expected, atol=1e-5)
    # the probe that picks the branch: kornia 0.9 checks sigma on the host, 0.8 (0.8.3 tried) on the device
    assert kornia_blur_checks_sigma_on_host() is (tuple(map(int, kornia.__version__.split(".")[:2])) >= (0, 9))


def test_views_of_one_image_differ():
    index, views, _ = next(iter(loader()))
    assert not torch.allclose(views[0], views[1])
    for k in range(len(index)):
        assert not torch.allclose(views[0][k], views[1][k])


# ----------------------------------------------------------------------------------------
# Order of images, epochs, processes


def test_every_image_once_per_epoch_and_set_epoch_reshuffles():
    data = loader(n=24, batch=8)
    epoch0 = indexes_of(data)
    assert sorted(epoch0) == list(range(24))
    data.sampler.set_epoch(1)
    epoch1 = indexes_of(data)
    assert sorted(epoch1) == list(range(24)) and epoch1 != epoch0


def test_epoch_is_reproducible_and_leaves_the_global_rng_alone():
    """A fresh loader set to epoch 1 (a run resumed there) yields exactly the batches the
    uninterrupted loader yields in its epoch 1, and iterating draws nothing from torch's
    global generator."""
    first = loader(seed=7)
    list(first)
    first.sampler.set_epoch(1)
    state = torch.get_rng_state()
    uninterrupted = list(first)
    assert torch.equal(state, torch.get_rng_state())
    resumed = loader(seed=7)
    resumed.sampler.set_epoch(1)
    for (i0, v0, t0), (i1, v1, t1) in zip(uninterrupted, list(resumed), strict=True):
        assert torch.equal(i0, i1) and torch.equal(t0, t1)
        assert all(torch.equal(a, b) for a, b in zip(v0, v1, strict=True))
    other_seed = loader(seed=8)
    other_seed.sampler.set_epoch(1)
    assert indexes_of(other_seed) != indexes_of(uninterrupted)


def test_a_steps_seed_is_shifted_as_a_python_int_as_numpy_1_needs(monkeypatch):
    """numpy 1 (what a torch 2.3 or older environment holds) reads a Python int beside a numpy
    scalar as an int64, and ``uint64 >> int64`` promotes to float64, which has no shift: every
    in-memory step failed with a TypeError there. The stand-in is a uint64 that follows numpy 1's
    rule under numpy 2; the seeds must be the same, 63-bit Python ints."""

    class Numpy1Uint64(np.uint64):
        def __rshift__(self, other):
            return np.uint64(self) >> (np.int64(other) if isinstance(other, int) else other)

    shipped = np.random.SeedSequence

    class Numpy1Seeds:
        def __init__(self, entropy):
            self.seeds = shipped(entropy)

        def generate_state(self, n_words, dtype):
            return [Numpy1Uint64(word) for word in self.seeds.generate_state(n_words, dtype)]

    expected = [memory_augment.step_seed(7, epoch, 0, step) for epoch in range(3) for step in range(5)]
    monkeypatch.setattr(np.random, "SeedSequence", Numpy1Seeds)
    seeds = [memory_augment.step_seed(7, epoch, 0, step) for epoch in range(3) for step in range(5)]
    assert seeds == expected and all(type(s) is int and 0 <= s < 2**63 for s in seeds)


def test_prefetch_cuts_the_next_steps_views_first_and_changes_no_view_step_or_resume_point(monkeypatch):
    """With prefetch, step n + 1's views are cut before step n is handed out (what lets a GPU
    overlap them with the training step), and the batches, their number and an epoch resumed
    from a fresh loader are exactly those without it."""
    seeds = []
    real = memory_loader.seeded_views
    monkeypatch.setattr(
        memory_loader, "seeded_views", lambda aug, batch, seed: seeds.append(seed) or real(aug, batch, seed)
    )
    plain, ahead = loader(seed=3), loader(seed=3, prefetch=True)
    first = next(iter(ahead))
    assert len(seeds) == 2  # step 0's views and, already, step 1's
    seeds.clear()
    next(iter(plain))
    assert len(seeds) == 1  # on a CPU the default cuts each step when it is asked for
    assert plain.prefetch is None and len(plain) == len(ahead) == 3
    for epoch in (0, 1):
        resumed = loader(seed=3, prefetch=True)  # a run resumed at this epoch: a fresh loader
        for data in (plain, ahead, resumed):
            data.sampler.set_epoch(epoch)
        batches = [list(plain), list(ahead), list(resumed)]
        assert len(batches[0]) == len(batches[1]) == len(batches[2]) == 3
        for (i0, v0, t0), (i1, v1, t1), (i2, v2, t2) in zip(*batches):
            assert torch.equal(i0, i1) and torch.equal(i0, i2) and torch.equal(t0, t1) and torch.equal(t0, t2)
            assert all(torch.equal(a, b) and torch.equal(a, c) for a, b, c in zip(v0, v1, v2))
    assert all(torch.equal(a, b) for a, b in zip(first[1], next(iter(loader(seed=3)))[1]))


def test_ddp_shards_are_disjoint_equal_and_cover_the_permutation():
    world, n = 4, 70
    shards = [indexes_of(loader(n=n, batch=4, world_size=world, rank=rank)) for rank in range(world)]
    assert all(len(shard) == 16 for shard in shards)  # 70 // 4 = 17 per process, 4 batches of 4
    assert len(set().union(*shards)) == 4 * 16
    permutation = loader(n=n, batch=4).sampler.indices(0, 1)[: (n // world) * world]
    for rank, shard in enumerate(shards):
        assert shard == permutation[rank::world][:16].tolist()
    assert len(loader(n=n, batch=4, world_size=world)) == 4


def test_world_size_is_checked_when_iterating(monkeypatch):
    data = loader(world_size=2)
    monkeypatch.setattr(memory_loader, "process_group", lambda: (0, 3))
    with pytest.raises(RuntimeError, match="2 process"):
        next(iter(data))
    monkeypatch.setattr(memory_loader, "process_group", lambda: (1, 2))
    assert len(list(data)) == len(data) == 1


def test_view_parallel_processes_see_the_same_images_with_other_views():
    ranks = [list(loader(shard=False, world_size=2, rank=rank)) for rank in range(2)]
    assert len(ranks[0]) == 3  # every process walks the whole permutation
    assert indexes_of(ranks[0]) == indexes_of(ranks[1])
    assert not torch.allclose(ranks[0][0][1][0], ranks[1][0][1][0])


# ----------------------------------------------------------------------------------------
# Statistics against solo-learn's torchvision pipeline


def aug_cfg(recipe: ViewRecipe):
    return OmegaConf.create(
        {
            "rrc": {"enabled": recipe.rrc, "crop_min_scale": recipe.scale[0], "crop_max_scale": recipe.scale[1]},
            "color_jitter": {
                "prob": recipe.jitter_prob,
                "brightness": recipe.brightness,
                "contrast": recipe.contrast,
                "saturation": recipe.saturation,
                "hue": recipe.hue,
            },
            "grayscale": {"prob": recipe.grayscale_prob},
            "gaussian_blur": {"prob": recipe.blur_prob},
            "solarization": {"prob": recipe.solarization_prob},
            "equalization": {"prob": recipe.equalization_prob},
            "horizontal_flip": {"prob": recipe.flip_prob},
            "crop_size": recipe.crop_size,
            "num_crops": 1,
        }
    )


def both_pipelines(recipe: ViewRecipe, image: np.ndarray, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` views of one (H, W, 3) uint8 image from each pipeline, un-normalized."""
    from solo.data.pretrain_dataloader import build_transform_pipeline

    with torch.random.fork_rng():
        torch.manual_seed(0)
        random.seed(0)
        transform = build_transform_pipeline("cifar10", aug_cfg(recipe))
        torchvision_views = torch.stack([transform(Image.fromarray(image)) for _ in range(count)])
    images = torch.from_numpy(image).permute(2, 0, 1)[None].expand(count, -1, -1, -1).contiguous()
    memory_views = seeded_views([(BatchAugment(recipe), 1)], images, seed=1)[0]
    mean, std = torch.tensor(CIFAR_MEAN).view(1, 3, 1, 1), torch.tensor(CIFAR_STD).view(1, 3, 1, 1)
    return torchvision_views * std + mean, memory_views * std + mean


def test_crop_geometry_matches_torchvision():
    """Crops of a coordinate ramp (red = 8 x column, green = 8 x row): the range of each
    channel gives the crop's width and height. 400 views each; the tolerances are about 3
    standard errors of the difference."""
    ramp = np.zeros((32, 32, 3), np.uint8)
    ramp[..., 0], ramp[..., 1], ramp[..., 2] = np.arange(32)[None] * 8, np.arange(32)[:, None] * 8, 128
    stats = []
    for views in both_pipelines(cifar_recipe(**NO_COLOUR), ramp, 400):
        width = (views[:, 0].amax((1, 2)) - views[:, 0].amin((1, 2))) * 255 / 8 + 1
        height = (views[:, 1].amax((1, 2)) - views[:, 1].amin((1, 2))) * 255 / 8 + 1
        area, log_aspect = width * height / 1024, torch.log(width / height)
        stats.append((area.mean(), area.std(), log_aspect.mean(), log_aspect.std()))
    (a_mean, a_sd, r_mean, r_sd), (b_mean, b_sd, s_mean, s_sd) = stats
    assert abs(a_mean - b_mean) < 0.05 and abs(a_sd - b_sd) < 0.03
    assert abs(r_mean - s_mean) < 0.04 and abs(r_sd - s_sd) < 0.03


def test_colour_statistics_match_torchvision():
    """Colour jitter + grayscale (mabt_cifar.yaml's) on a smooth colourful image, no crop:
    per-view brightness and saturation, and the share of grey views. 400 views each."""
    small = np.random.default_rng(0).integers(0, 256, (4, 4, 3), dtype=np.uint8)
    image = np.asarray(Image.fromarray(small).resize((32, 32), Image.BICUBIC))
    stats = []
    for views in both_pipelines(cifar_recipe(rrc=False, flip_prob=0.0), image, 400):
        views = views.clamp(0, 1)
        brightness = (0.299 * views[:, 0] + 0.587 * views[:, 1] + 0.114 * views[:, 2]).mean((1, 2))
        high, low = views.amax(1), views.amin(1)
        saturation = ((high - low) / high.clamp(min=1e-6)).mean((1, 2))
        stats.append((brightness.mean(), brightness.std(), saturation.mean(), (saturation < 1e-3).float().mean()))
    (b0, bsd0, s0, g0), (b1, bsd1, s1, g1) = stats
    assert abs(b0 - b1) < 0.02 and abs(bsd0 - bsd1) < 0.02
    assert abs(s0 - s1) < 0.05
    assert abs(g0 - g1) < 0.06 and 0.1 < g1 < 0.3  # grayscale p = 0.2


# ----------------------------------------------------------------------------------------
# Decoding, the cache, bad files, memory


def write_images(root: Path, sizes: list[tuple[int, int]], seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    files = []
    for k, (width, height) in enumerate(sizes):
        path = root / f"{k:03d}.png"
        Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(path)
        files.append(str(path))
    return files


def test_decode_keeps_uniform_sizes_and_resizes_mixed_ones(tmp_path, monkeypatch):
    files = write_images(tmp_path / "same", [(12, 10)] * 3)
    images = decode_to_uint8(files, None, None)
    assert images.dtype == torch.uint8 and tuple(images.shape) == (3, 3, 10, 12)
    assert torch.equal(images[1], torch.from_numpy(np.asarray(Image.open(files[1]))).permute(2, 0, 1))
    assert tuple(decode_to_uint8(files, 8, None).shape) == (3, 3, 8, 8)
    monkeypatch.setattr(memory_cache, "MIXED_SIZE_DEFAULT", 6)
    mixed = write_images(tmp_path / "mixed", [(12, 10), (9, 9), (20, 7)])
    assert tuple(decode_to_uint8(mixed, None, None).shape) == (3, 3, 6, 6)


def test_cache_is_reused_and_renewed_when_a_file_changes(tmp_path, monkeypatch):
    files = write_images(tmp_path / "images", [(8, 8)] * 5)
    shuffled = [files[k] for k in (3, 0, 4, 1, 2)]
    cache = tmp_path / "cache"
    first = decode_to_uint8(shuffled, None, cache)
    assert len(list(cache.glob("*.npy"))) == 1 and not list(cache.glob(".*tmp"))
    decodes = []
    real_decode = memory_cache._decode_one
    monkeypatch.setattr(memory_cache, "_decode_one", lambda *args: decodes.append(args[0]) or real_decode(*args))
    again = decode_to_uint8(shuffled, None, cache)
    assert decodes == [] and torch.equal(first, again)
    assert torch.equal(decode_to_uint8(files, None, cache)[3], first[0])  # rows follow the given order
    Image.new("RGB", (8, 8), (1, 2, 3)).save(files[2])
    os.utime(files[2], ns=(1, 1))  # a new modification time, whatever the clock's resolution
    renewed = decode_to_uint8(shuffled, None, cache)
    assert decodes and renewed[4].flatten(1).unique(dim=1).tolist() == [[1], [2], [3]]


def test_corrupt_file_raises_data_error_naming_it(tmp_path):
    files = write_images(tmp_path, [(8, 8)] * 3)
    Path(files[1]).write_bytes(b"not an image at all")
    with pytest.raises(DataError, match=rf"{re.escape(files[1])}.*delete or replace"):
        decode_to_uint8(files, 8, None)
    with pytest.raises(DataError, match=re.escape(files[1])):
        decode_to_uint8(files, None, None)


def test_too_large_a_data_set_raises_config_error_before_decoding(tmp_path, monkeypatch):
    assert memory_bytes_needed(50000, 32, 32) == 50000 * 3 * 32 * 32
    with pytest.raises(ConfigError, match="use data.format=dali or image_folder instead"):
        check_fits(memory_bytes_needed(10**7, 4096, 4096), "cpu")
    check_fits(memory_bytes_needed(10, 8, 8), "cpu")
    files = write_images(tmp_path, [(8, 8)] * 3)
    monkeypatch.setattr(memory_cache, "available_ram", lambda: 100)
    monkeypatch.setattr(memory_cache, "_decode_one", lambda *args: pytest.fail("decoded before the check"))
    with pytest.raises(ConfigError, match="needs 0.00 GiB"):
        decode_to_uint8(files, None, None, check=lambda shape: check_fits(shape[0] * 3 * shape[2] * shape[3], "cpu"))


def test_pretrain_memory_loader_from_a_config(tmp_path):
    train = tmp_path / "data" / "train"
    files = write_images(train / "class_0", [(32, 32)] * 10)
    cfg = OmegaConf.create(
        {
            "data": {"dataset": "cifar10", "train_path": str(train)},
            "augmentations": [aug_cfg(cifar_recipe(num_crops=2))],
            "optimizer": {"batch_size": 4},
            "seed": 3,
            "accelerator": "cpu",
            "devices": 1,
            "num_nodes": 1,
            "method_kwargs": {"view_parallel": False},
        }
    )
    cfg.augmentations[0].num_crops = 2
    data = pretrain_memory_loader(cfg, files, [0] * 10)
    assert len(data) == 2 and data.seed == 3 and data.images.device.type == "cpu" and data.prefetch is None
    assert pretrain_memory_loader(OmegaConf.merge(cfg, {"memory": {"prefetch": True}}), files, [0] * 10).prefetch
    index, views, targets = next(iter(data))
    assert len(views) == 2 and tuple(views[0].shape) == (4, 3, 32, 32)
    assert len(list((tmp_path / "data" / ".mvssl_cache").glob("*.npy"))) == 1  # beside train/, not inside
    assert not (train / ".mvssl_cache").exists()
    assert data.resolution is None
    ramped = OmegaConf.merge(cfg, {"max_epochs": 4, "memory": {"resolution": {"start": 16, "ramp_end": 0.5}}})
    data = pretrain_memory_loader(ramped, files, [0] * 10)
    assert data.resolution == ResolutionRamp(start=16, full=32, ramp_start=0.0, ramp_end=0.5) and data.epochs == 4
    assert [data.side(e) for e in range(4)] == [16, 24, 32, 32]


# ---- the fast probe's feature pass ------------------------------------------------------


def test_probe_recipe_is_read_off_solo_learns_linear_eval_transforms():
    recipe, size = probe_recipes("cifar10")
    assert size == recipe.crop_size == 32 and recipe.rrc and recipe.scale == (0.08, 1.0)
    assert recipe.flip_prob == 0.5 and recipe.jitter_prob == recipe.grayscale_prob == 0.0
    assert recipe.mean == (0.4914, 0.4822, 0.4465) and recipe.std == (0.247, 0.243, 0.261)
    assert probe_recipes("stl10")[1] == 96
    with pytest.raises(ConfigError, match="use data.format=image_folder"):
        probe_recipes("imagenet100")  # Resize(256) + CenterCrop(224): not a plain pass


def test_probe_loader_plain_pass_is_solo_learns_val_transform_and_augmented_passes_differ():
    from solo.data.classification_dataloader import prepare_transforms

    recipe, _ = probe_recipes("cifar10")
    images = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (10, 3, 32, 32), dtype=np.uint8))
    _, t_val = prepare_transforms("cifar10")
    expected = torch.stack([t_val(Image.fromarray(image.permute(1, 2, 0).numpy())) for image in images])

    plain = MemoryEvalLoader(images, list(range(10)), recipe, augment=False, batch_size=4)
    assert len(plain) == 3
    x = torch.cat([batch for batch, _ in plain])
    labels = torch.cat([label for _, label in plain])
    torch.testing.assert_close(x, expected, rtol=0, atol=1e-6)
    assert labels.tolist() == list(range(10))

    augmented = MemoryEvalLoader(images, list(range(10)), recipe, augment=True, batch_size=4, seed=5)
    first, second = (torch.cat([batch for batch, _ in augmented]) for _ in range(2))
    assert first.shape == expected.shape and not torch.equal(first, second), "each pass draws new patches"
    again = MemoryEvalLoader(images, list(range(10)), recipe, augment=True, batch_size=4, seed=5)
    torch.testing.assert_close(torch.cat([batch for batch, _ in again]), first, rtol=0, atol=0)
    with pytest.raises(ValueError, match="the recipe wants 32 px"):
        MemoryEvalLoader(images[..., :16, :16], list(range(10)), recipe, augment=False)


def test_linear_evaluation_says_which_pipeline_reads_its_images():
    from mvssl_plugin.train.launch_checks import check_eval_format

    def cfg(data_format: str, probe: bool, dataset: str = "cifar10"):
        return OmegaConf.create({"data": {"format": data_format, "dataset": dataset}, "probe": {} if probe else None})

    assert check_eval_format(cfg("memory", probe=True)) == []
    assert check_eval_format(cfg("image_folder", probe=False)) == []
    (notice,) = check_eval_format(cfg("memory", probe=False))
    assert "solo-learn's linear evaluation reads its images with torchvision" in notice
    (notice,) = check_eval_format(cfg("dali", probe=True))
    assert "the fast probe reads its images with torchvision; dali serves pretraining" in notice
    with pytest.raises(ConfigError, match="the in-memory probe serves cifar10, cifar100 and stl10"):
        check_eval_format(cfg("memory", probe=True, dataset="imagenet100"))


def test_probe_memory_loaders_keep_the_files_and_labels_of_the_torchvision_path(tmp_path):
    """With data.fraction, solo-learn subsets ImageFolder's samples but not its targets: the
    memory probe must pair each decoded image with its own label, as torchvision's does."""
    from solo.data.classification_dataloader import prepare_transforms

    from mvssl_plugin.data.labelled_sets import classification_datasets

    for split in ("train", "test"):
        for label in range(3):
            write_images(tmp_path / split / f"class_{label}", [(32, 32)] * 6, seed=10 * label + len(split))
    cfg = OmegaConf.create(
        {
            "data": {
                "dataset": "cifar10", "train_path": str(tmp_path / "train"), "val_path": str(tmp_path / "test"),
                "format": "memory", "fraction": 0.5,
            },
            "memory": {"cache_dir": str(tmp_path / "cache")},
            "seed": 0,
        }
    )  # fmt: skip
    t_train, t_val = prepare_transforms("cifar10")
    train_set, test_set = classification_datasets(cfg, t_train, t_train, cfg.data.fraction)
    _, plain_set = classification_datasets(cfg, t_val, t_val, cfg.data.fraction)
    train, plain, patches = probe_memory_loaders(cfg, train_set, test_set, torch.device("cpu"))

    expected_train = [plain_set.loader(path) for path, _ in train_set.samples]  # PIL images, subset order
    assert len(train.images) == 9 and len(plain.images) == 18
    assert torch.cat([y for _, y in train]).tolist() == [label for _, label in train_set.samples]
    assert sorted(torch.cat([y for _, y in train]).tolist()) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    for image, pil in zip(train.images, expected_train):
        assert torch.equal(image.permute(1, 2, 0), torch.from_numpy(np.asarray(pil)))
    plain_x = torch.cat([x for x, _ in plain])
    torch.testing.assert_close(plain_x, torch.stack([plain_set[i][0] for i in range(18)]), rtol=0, atol=1e-6)
    assert torch.cat([y for _, y in patches]).tolist() == [plain_set[i][1] for i in range(18)]


def test_online_validation_in_memory_is_solo_learns_val_loader(tmp_path, monkeypatch):
    """Pretraining's online validation with data.format=memory: the batches of solo-learn's
    val loader (same images, order, labels and normalization; data.val_fraction's subset),
    and under DDP each process takes its share."""
    from mvssl_plugin.data.loaders import build_val_loader

    for label in range(3):
        write_images(tmp_path / "test" / f"class_{label}", [(32, 32)] * 8, seed=label)
        write_images(tmp_path / "train" / f"class_{label}", [(32, 32)] * 2, seed=9)

    def cfg(data_format: str):
        return OmegaConf.create(
            {
                "data": {
                    "dataset": "cifar10", "train_path": str(tmp_path / "train"), "val_path": str(tmp_path / "test"),
                    "format": data_format, "val_fraction": 0.5, "num_workers": 0, "no_labels": False,
                },
                "memory": {"cache_dir": str(tmp_path / "cache")},
                "optimizer": {"batch_size": 5},
                "accelerator": "cpu",
            }
        )  # fmt: skip

    solo = build_val_loader(cfg("image_folder"))
    ours = build_val_loader(cfg("memory"))
    assert isinstance(ours, MemoryEvalLoader) and len(ours) == len(solo) == 3
    solo_x, solo_y = (torch.cat(part) for part in zip(*solo))
    ours_x, ours_y = (torch.cat(part) for part in zip(*ours))
    assert len(solo_y) == 12 and torch.equal(ours_y, solo_y)
    torch.testing.assert_close(ours_x, solo_x, rtol=0, atol=1e-6)

    shares = []
    for rank in range(2):
        monkeypatch.setattr(memory_eval, "process_group", lambda rank=rank: (rank, 2))
        assert len(ours) == 2
        shares.append(torch.cat([y for _, y in ours]))
    assert torch.equal(torch.stack(shares, 1).flatten(), solo_y)  # rank r takes rows r, r + 2, ...


# ---- the resolution ramp, the way a user turns it on ------------------------------------


@pytest.mark.slow
def test_main_pretrain_trains_with_a_resolution_ramp_and_says_its_sides(tiny_cifar, tmp_path, monkeypatch):
    from helpers import pretrain_args, run_entry

    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # conftest's one_thread, shadowed by this module's

    extra = {"data.format": "memory", "max_epochs": 2, "+memory.resolution.start": 16}
    extra["+memory.resolution.strength_start"] = 0.5  # the augmentation's magnitude grows with the side
    run = run_entry("main_pretrain.py", pretrain_args(tiny_cifar, tmp_path / "runs", **extra), tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    said = "16 px at 0.50 of the augmentation in epoch 0, 32 px at 1.00 of the augmentation in epoch 1"
    assert f"mvssl: views grow from 16 to 32 px (memory.resolution): {said}" in run.stdout
    assert len(list((tmp_path / "runs" / "mabt").glob("*/*ep=1.ckpt"))) == 1
