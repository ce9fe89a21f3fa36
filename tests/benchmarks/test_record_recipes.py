"""The recipes are the records (issue 93): every leaderboard setting with records is a recipe, and
that recipe, composed and checked as ``main_pretrain.py`` does it, is the config each of its records
ran (the ``args.json`` its run wrote), key for key, except what a run sets for itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import leaderboard_plan as plans
import pytest
from omegaconf import OmegaConf

from mvssl_plugin.cli.config_name import compose_recipe
from mvssl_plugin.files import read_csv
from mvssl_plugin.train.pretrain import build_pretrain_model

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "leaderboard"
#: what a run sets for itself or a machine decides: the seed, names and folders, wandb, what it
#: printed, the precision, threads and optimizer kernel that ``precision: auto`` and
#: ``performance.cpu_threads: auto`` chose on the CPU it ran on, and the DALI key solo-learn's parser
#: adds only where DALI is installed (read by ``data.format=dali`` alone)
PER_RUN = ("seed", "name", "checkpoint.dir", "wandb.", "run_summary.", "wandb_run_id", "precision",
           "performance.precision_reason", "performance.cpu_threads", "performance.optimizer_path",
           "optimizer.kwargs.fused", "data.train_path", "data.val_path", "devices",
           "dali.encode_indexes_into_labels")  # fmt: skip
#: a constant lr's cap, which the run's clock reaches first (checked below), and a record trained on
#: past ``RECORD_MINUTES`` whose row is read at them (``records --minutes 60``)
BUDGET = ("max_epochs", "epoch_knn.stop_after_minutes")


def flat(node: Any, prefix: str = "") -> Iterator[Tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from flat(value, f"{prefix}{key}.")
    else:
        yield prefix.rstrip("."), node


#: a peer's record with its loss in float32: its recipe with this key (``records --loss-fp32``)
FP32_KEY = "+performance.loss_fp32=true"


def records() -> Iterator[Tuple[str, Dict[str, str], Path]]:
    for row in read_csv(RESULTS / "records.csv"):
        if row["setting"].removesuffix(f"-{plans.FP32}") in plans.RECORD_RECIPES:
            (args,) = (RESULTS / "records" / row["machine"] / row["run"]).glob("args.json")
            yield row["setting"], row, args


RECORDS = sorted(records(), key=lambda r: (r[0], r[1]["machine"], r[1]["seed"]))


def test_every_setting_with_records_is_a_recipe_and_every_recipe_has_records():
    settings = {row["setting"] for row in read_csv(RESULTS / "records.csv")}
    picks = {str(p["tag"]) for p in plans.picks(read_csv(RESULTS / "screens.csv")).values()}
    assert picks <= set(plans.RECORD_RECIPES), "a pick has no recipe"
    assert set(plans.RECORD_RECIPES) <= settings
    assert plans.FASTEST in plans.RECORD_RECIPES


@pytest.fixture(scope="module")
def checked(tiny_cifar) -> Dict[Tuple[str, str], Dict[str, Any]]:
    """Each recipe (and each peer's with ``FP32_KEY``) composed with a seed, checked and completed as
    ``main_pretrain.py`` does, flat (on the tiny set's folders: the records' CIFAR-10 need not be here;
    the paths are not compared)."""
    out: Dict[Tuple[str, str], Dict[str, Any]] = {}
    folders = [f"data.train_path={tiny_cifar['train']}", f"data.val_path={tiny_cifar['test']}"]
    settings = {**plans.RECORD_RECIPES, "speedrun": "speedrun_cpu.yaml"}
    settings.update(
        {f"{s}-{plans.FP32}": r for s, r in plans.RECORD_RECIPES.items() if any(x[0] == f"{s}-fp32" for x in RECORDS)}
    )
    for setting, recipe in settings.items():
        extra = [FP32_KEY] if setting.endswith(f"-{plans.FP32}") else []
        for seed in ("1", "2"):
            cfg = compose_recipe(recipe, "pretrain", [f"seed={seed}", *folders, *extra])
            cfg, _ = build_pretrain_model(cfg, notify=lambda _: None)
            out[setting, seed] = dict(flat(OmegaConf.to_container(cfg, resolve=True)))
    return out


def drift(recipe: Dict[str, Any], ran: Dict[str, Any]) -> Dict[str, Tuple[Any, Any]]:
    """The keys whose values differ between a checked recipe and a record's config, (recipe, ran)."""
    keys = {k for k in {*ran, *recipe} if not k.startswith(PER_RUN) and k not in BUDGET}
    return {k: (recipe.get(k, "<absent>"), ran.get(k, "<absent>")) for k in keys if recipe.get(k) != ran.get(k)}


@pytest.mark.parametrize("setting,row,args", RECORDS, ids=[f"{r[1]['machine']}-{r[1]['run']}" for r in RECORDS])
def test_a_records_recipe_composes_to_the_config_it_ran(setting, row, args, checked):
    ran = dict(flat(json.loads(args.read_text())))
    recipe = checked[setting, row["seed"]]
    differ = drift(recipe, ran)
    assert not differ, f"{setting}: its recipe differs from {row['run']} (recipe, ran)"
    assert int(row["epochs"]) < recipe["max_epochs"], "the cap, not the clock, ended the record"
    minutes = float(ran["epoch_knn.stop_after_minutes"])
    # its recipe's budget, or a 30-minute recipe trained on past it, which the records read within it
    assert minutes == recipe["epoch_knn.stop_after_minutes"] or (
        minutes > plans.RECORD_MINUTES == recipe["epoch_knn.stop_after_minutes"]
        and float(row["train_minutes"]) < plans.RECORD_MINUTES + 5
    )


def test_the_speedrun_recipe_is_the_fastest_setting(checked):
    fastest, speedrun = checked[plans.FASTEST, "1"], checked["speedrun", "1"]
    assert {k: v for k, v in speedrun.items() if k != "name"} == {k: v for k, v in fastest.items() if k != "name"}


def test_the_check_catches_a_recipe_that_drifted(checked):
    """A recipe whose lr or views moved from its records' is reported, key by key."""
    setting, row, args = next(r for r in RECORDS if r[0] == "mavicreg-adam-4e-3")
    ran = dict(flat(json.loads(args.read_text())))
    recipe = dict(checked[setting, row["seed"]])
    assert drift(recipe, ran) == {}
    recipe.update({"optimizer.lr": 2 * recipe["optimizer.lr"], "data.num_views": 4})
    assert set(drift(recipe, ran)) == {"optimizer.lr", "data.num_views"}
