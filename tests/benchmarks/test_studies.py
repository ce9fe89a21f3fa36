"""The paper-claims studies: their Hydra multirun sweeps through the entry point, the
provenance each run records, and the report script over real (tiny) runs."""

from __future__ import annotations

import json

import pytest
from helpers import run_entry, tiny_overrides
from omegaconf import OmegaConf

from mvssl_plugin.cli.config_name import compose_recipe, find_recipe_dir


@pytest.mark.parametrize(
    "recipe,jobs",
    [("study_pdim.yaml", 16), ("study_views.yaml", 6), ("study_data.yaml", 3)],
)
def test_study_recipes_compose(recipe, jobs):
    cfg = compose_recipe(recipe, "pretrain")
    assert cfg.max_epochs == 20 and cfg.checkpoint.dir.startswith("benchmarks/results/study_")
    # the sweep is the recipe's own hydra node (compose() leaves the hydra node out of cfg)
    params = OmegaConf.load(find_recipe_dir(recipe, "pretrain") / recipe).hydra.sweeper.params
    count = 1
    for values in params.values():
        count *= len(str(values).split(","))
    assert count == jobs


@pytest.mark.parametrize("pair,views,fraction", [("2x100", 2, -1), ("4x50", 4, 0.5), ("8x25", 8, 0.25)])
def test_study_pairs_set_views_and_fraction(pair, views, fraction):
    cfg = compose_recipe("study_data.yaml", "pretrain", [f"study_pair={pair}"])
    assert cfg.data.num_views == views and cfg.data.fraction == fraction
    assert sum(a.num_crops for a in cfg.augmentations) == views


@pytest.mark.slow
def test_multirun_sweep_records_each_job(tiny_cifar, tmp_path):
    results = tmp_path / "results"
    overrides = tiny_overrides(
        tiny_cifar,
        results / "study_b_views" / "trained_models",
        **{"hydra.sweep.dir": str(tmp_path / "multirun"), "max_epochs": 2, "method_kwargs.proj_output_dim": 256},
    )
    sweep = ["--config-name", "study_views.yaml", "-m", "method=mabt", "data.num_views=2,4", *overrides]
    result = run_entry("main_pretrain.py", sweep, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    folders = sorted((results / "study_b_views" / "trained_models" / "mabt").iterdir())
    assert len(folders) == 2
    commands = []
    for folder in folders:
        launch = json.loads((folder / "run.json").read_text())["launches"][-1]
        assert launch["finished"] and launch["epochs_completed"] == 2 and "CPU" in launch["device"]
        assert " -m " not in launch["command"] and "data.num_views=" in launch["command"]
        commands.append(launch["command"])
    assert {c.split("data.num_views=")[1].split()[0] for c in commands} == {"2", "4"}
