"""The peak-RAM check before pretraining (train/peak_ram_check.py): what fits is named, and every
recipe fits its machine."""

from __future__ import annotations

import re

import pytest
from helpers import assert_one_line, checked_config, pretrain_args, run_entry

from mvssl_plugin.cli.config_name import list_recipes
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.peak_ram_estimate import GiB

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.slow
def test_memory_check_names_the_batch_and_views_that_fit(tiny_cifar, tmp_path):
    args = pretrain_args(tiny_cifar, tmp_path / "runs", **{"optimizer.batch_size": 100_000})
    line = assert_one_line(run_entry("main_pretrain.py", args, tmp_path), 2, "optimizer.batch_size=100000 with")
    assert re.search(
        r"needs about [\d.]+ GiB .* the largest that fits is optimizer.batch_size=\d+ with data.num_views=4", line
    )
    args = pretrain_args(tiny_cifar, tmp_path / "runs", **{"data.num_views": 100_000})
    line = assert_one_line(run_entry("main_pretrain.py", args, tmp_path), 2, "data.num_views=100000 (100000 x 32 px)")
    assert re.search(r"the largest that fits is data.num_views=\d+ with optimizer.batch_size=8$", line)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("recipe", list_recipes("pretrain"))
def test_every_recipe_fits_an_80_gib_gpu(recipe):
    from mvssl_plugin.train.peak_ram_check import check_peak_ram

    assert check_peak_ram(checked_config(recipe, "gpu"), available=78 * GiB) == []


def test_cpu_recipes_fit_this_machine_and_absurd_ones_do_not():
    from mvssl_plugin.train.peak_ram_check import check_peak_ram

    for recipe in ("mabt_cifar_cpu.yaml", "mavicreg_cifar_cpu.yaml"):
        check_peak_ram(checked_config(recipe, "cpu"), available=16 * GiB)  # 24 GiB machine, some of it taken
    # the tiny test recipes fit in 1.5 GiB
    check_peak_ram(checked_config("mabt_cifar.yaml", "cpu", **dict(o.split("=", 1) for o in TINY)), available=1.5 * GiB)
    with pytest.raises(ConfigError, match=r"data.num_views=64 .* the largest that fits is optimizer.batch_size=\d+"):
        check_peak_ram(checked_config("mabt_cifar.yaml", "cpu", **{"data.num_views": 64}), available=20 * GiB)


TINY = ["backbone.name=narrow_resnet18", "+backbone.kwargs.width=8", "optimizer.batch_size=8"]


def test_a_wider_first_stage_is_counted_at_its_width_everywhere():
    """An upper bound: the estimate has no term for one stage, so it prices the whole network at
    the wider width (never below what the narrow network needs)."""
    from mvssl_plugin.train.peak_ram_check import run_shape

    narrow = run_shape(checked_config("speedrun_cpu.yaml", "cpu"))
    wide = run_shape(checked_config("speedrun_cpu.yaml", "cpu", **{"++backbone.kwargs.first_stage_width": 32}))
    assert (narrow.width, wide.width) == (16, 32)
    thin = run_shape(checked_config("speedrun_cpu.yaml", "cpu", **{"++backbone.kwargs.first_stage_width": 8}))
    assert thin.width == 16
