"""The resolution ramp: the side per epoch is the docstring's equation, grows monotonically to
the full size by the last epoch, and refuses settings it cannot honour; the augmentation's
magnitude grows with the side when asked."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mvssl_plugin.data.pipeline import ViewRecipe
from mvssl_plugin.data.resolution import ResolutionRamp, full_side, scaled_side


@pytest.mark.parametrize(
    "epochs,sides",
    [
        (1, [32]),  # a 1-epoch run trains at the full size
        (2, [16, 32]),
        (3, [16, 24, 32]),  # t = 0.5: 16 + 16 * 0.5 / 0.75 = 26.7 -> 24
        (5, [16, 24, 24, 32, 32]),  # t = 0.25: 21.3 -> 24; t = 0.75: 32
    ],
)
def test_sides_follow_the_equation_and_end_at_the_full_size(epochs, sides):
    assert ResolutionRamp(start=16, full=32).sides(epochs) == sides


def test_ramp_start_holds_the_start_side_and_multiple_rounds():
    ramp = ResolutionRamp(start=8, full=32, ramp_start=0.5, ramp_end=1.0, multiple=4)
    # t = e / 10: 8 px until t = 0.5, then 8 + 24 * (t - 0.5) / 0.5, to the nearest 4
    assert ramp.sides(11) == [8, 8, 8, 8, 8, 8, 12, 16, 24, 28, 32]


def test_sides_never_shrink_and_stay_within_start_and_full():
    for epochs in range(1, 40):
        sides = ResolutionRamp(start=16, full=32).sides(epochs)
        assert sides == sorted(sides) and sides[-1] == 32 and min(sides) >= 16


def test_cost_is_the_pixel_fraction():
    assert ResolutionRamp(start=16, full=32).cost(3) == pytest.approx((16**2 + 24**2 + 32**2) / (3 * 32**2))
    assert ResolutionRamp(start=32, full=32).cost(7) == 1.0


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"start": 40}, "start=40"),
        ({"start": 0}, "start=0"),
        ({"ramp_start": 0.8, "ramp_end": 0.5}, "ramp_start < ramp_end"),
        ({"ramp_end": 1.5}, "ramp_end <= 1"),
        ({"multiple": 0}, "multiple=0"),
        ({"strength_start": 1.5}, "strength_start=1.5"),
        ({"strength_start": -0.1}, "strength_start=-0.1"),
    ],
)
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ResolutionRamp(**{"start": 16, "full": 32, **kwargs})


def test_the_full_side_is_the_largest_pipelines():
    """The YAML's pipelines and the ViewRecipes both carry ``crop_size``; the order does not matter."""
    assert full_side([SimpleNamespace(crop_size=16), SimpleNamespace(crop_size=32), SimpleNamespace(crop_size=8)]) == 32
    assert full_side([SimpleNamespace(crop_size=24)]) == 24


def test_small_views_scale_with_the_largest():
    assert scaled_side(16, largest=16, full=32) == 8
    assert scaled_side(24, largest=24, full=32) == 18
    assert scaled_side(2, largest=8, full=32) == 1  # never below a pixel


def test_strength_grows_with_the_side_trained_to_the_recipes_at_the_full_side():
    ramp = ResolutionRamp(start=16, full=32, strength_start=0.5)
    # 0.5 + 0.5 * (side - 16) / 16, read off the rounded sides 16, 24, 32 of a 3-epoch run
    assert [ramp.strength(side) for side in ramp.sides(3)] == [0.5, 0.75, 1.0]
    assert ResolutionRamp(start=16, full=32).strength(16) == 1.0  # the default keeps the recipe's
    assert ResolutionRamp(start=32, full=32, strength_start=0.0).strength(32) == 1.0  # no ramp, no change


def test_a_recipe_at_a_strength_scales_the_jitter_and_narrows_the_crop_toward_its_largest():
    recipe = ViewRecipe(
        crop_size=32, num_crops=2, rrc=True, scale=(0.08, 1.0), jitter_prob=0.8, brightness=0.4, contrast=0.4,
        saturation=0.2, hue=0.1, grayscale_prob=0.2, blur_prob=0.0, solarization_prob=0.1, equalization_prob=0.0,
        flip_prob=0.5, mean=(0.5, 0.5, 0.5), std=(0.2, 0.2, 0.2),
    )  # fmt: skip
    half = recipe.at_strength(0.5)
    assert half.scale == pytest.approx((0.54, 1.0))  # 1 - 0.5 * 0.92
    assert (half.brightness, half.contrast, half.saturation, half.hue) == pytest.approx((0.2, 0.2, 0.1, 0.05))
    # how often each step fires, and everything else, as the recipe says
    unchanged = ("crop_size", "num_crops", "jitter_prob", "grayscale_prob", "solarization_prob", "flip_prob", "mean")
    assert all(getattr(half, k) == getattr(recipe, k) for k in unchanged)
    assert recipe.at_strength(0.0).scale == (1.0, 1.0) and recipe.at_strength(0.0).hue == 0.0
    assert recipe.at_strength(1.0) is recipe
    small = ViewRecipe(**{**recipe.__dict__, "crop_size": 16, "scale": (0.05, 0.14)})
    assert small.at_strength(0.5).scale == pytest.approx((0.095, 0.14))  # stays a valid range for small crops
