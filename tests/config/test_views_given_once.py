"""The view count given two ways (config/views.py, check_views_given_once): a command line that
sets a pipeline's num_crops against data.num_views stops before any work, naming both."""

from __future__ import annotations

import pytest
from helpers import assert_one_line, make_image_folder, pretrain_args, run_entry
from omegaconf import OmegaConf

from mvssl_plugin.cli.config_name import compose_recipe
from mvssl_plugin.config.views import check_views_given_once, crops_on_command_line
from mvssl_plugin.errors import ConfigError


def test_crop_counts_are_read_off_the_overrides():
    overrides = ["data.num_views=4", "augmentations.0.num_crops=8", "++augmentations.1.num_crops=2", "seed=3"]
    assert crops_on_command_line(overrides) == {0: "8", 1: "2"}


@pytest.mark.parametrize(
    ("recipe", "overrides", "error"),
    [
        ("mabt_cifar.yaml", ["augmentations.0.num_crops=8"], "data.num_views=4 and augmentations.0.num_crops=8"),
        ("mabt_cifar.yaml", ["data.num_views=8", "augmentations.0.num_crops=8"], None),  # they agree
        ("mabt_cifar.yaml", ["data.num_views=8"], None),  # one way: taken as before
        # solo-learn's asymmetric pair, 1 crop each in its file: data.num_views=4 spreads 2 and 2
        ("solo_barlow_cifar_cpu.yaml", ["data.num_views=4"], None),
        ("solo_barlow_cifar_cpu.yaml", ["augmentations.1.num_crops=3"], "makes it 1"),
    ],
)
def test_two_ways_that_disagree_stop_and_one_way_is_taken(recipe, overrides, error):
    cfg = compose_recipe(recipe, "pretrain", overrides)
    if error is None:
        check_views_given_once(cfg, overrides)
    else:
        with pytest.raises(ConfigError, match=error):
            check_views_given_once(cfg, overrides)


@pytest.mark.slow
def test_the_entry_point_stops_in_one_line_before_any_work(tmp_path, one_thread):
    data = {"train": str(make_image_folder(tmp_path / "train")), "test": str(make_image_folder(tmp_path / "test"))}
    result = run_entry("main_pretrain.py", [*pretrain_args(data, tmp_path), "augmentations.0.num_crops=8"], tmp_path)
    assert_one_line(result, 2, "data.num_views=4 and augmentations.0.num_crops=8", "set the views once")
    assert not (tmp_path / "mabt").exists()


def test_views_of_reads_one_form_from_a_config_or_an_args_json():
    from mvssl_plugin.config.views import ViewCount, views_of

    pipelines = {"augmentations": [{"crop_size": 32, "num_crops": 4}, {"crop_size": 16, "num_crops": 2}]}
    assert views_of(OmegaConf.create(pipelines)) == ViewCount(4, 2, ((32, 4), (16, 2)))
    # solo-learn's counts win where they are set, as in a run's args.json (a plain dict, no pipelines)
    assert views_of({"data": {"num_large_crops": 8, "num_small_crops": 0}}) == ViewCount(8, 0, ())
    assert views_of(compose_recipe("mabt_cifar_multicrop.yaml", "pretrain")).m == 6
