"""The modelled-clock speedrun's settings, clock and report (``speedrun_settings``,
``speedrun_clock``, ``speedrun_rows``, ``speedrun_report``): its recipes trained a few steps through
main_pretrain.py, its learning-rate schedule ending at the budget, and its time and record
arithmetic on made-up CSV rows."""

from __future__ import annotations

from pathlib import Path

import pytest
import speedrun_clock as clock
import speedrun_report as report
import speedrun_rows
import speedrun_settings as settings
import torch
from claims import grid, runner
from helpers import run_entry
from speedrun_clock import StepTime

CPU = grid.SCALES["cpu"]
REF = settings.REFERENCE  # the levers' reference: the recipe at the lr they were screened at


def _curve(run: str, knn: list, steps_per_epoch: int = 390) -> list:
    return [
        {"run": run, "epoch": str(e), "step": str(e * steps_per_epoch), "knn_backbone": str(k)}
        for e, k in enumerate(knn, start=1)
    ]


def test_a_settings_longer_runs_are_its_unscheduled_runs_shortest_first():
    """What lever_rows reads a reference from past its screen: every finished run of a setting
    without a schedule (its first epochs are a shorter run's), shortest first, whatever order
    they finished in; a scheduled setting lends none."""
    results = [{"run": r} for r in ("lr2e-3-e74-s1", "lr2e-3-e3-s1", "cos-lr1e-3-e3-s1", "lr2e-3-e18-s1")]
    assert report.longer_runs(results) == {"lr2e-3": ["lr2e-3-e3-s1", "lr2e-3-e18-s1", "lr2e-3-e74-s1"]}


def test_seconds_to_a_target_and_knn_at_a_budget_use_steps_times_the_step():
    curve = _curve("r", [40.0, 52.0, 56.0, 61.0])
    assert speedrun_rows.seconds_to(curve, 50, 0.25) == 780 * 0.25
    assert speedrun_rows.seconds_to(curve, 60, 0.25) == 1560 * 0.25
    assert speedrun_rows.seconds_to(curve, 65, 0.25) is None
    assert speedrun_rows.knn_at(curve, 350.0, 0.25) == 56.0  # epoch 3 ends at 292.5 s, epoch 4 at 390 s
    assert speedrun_rows.knn_at(curve, 390.0, 0.25) == 61.0
    assert speedrun_rows.knn_at(curve, 480.0, 0.25) == 61.0  # ended less than an epoch sooner: its final encoder
    assert speedrun_rows.knn_at(curve, 9999.0, 0.25) is None  # ended long before: no figure there
    assert speedrun_rows.knn_at(curve, 97.0, 0.25) is None  # no epoch had ended
    assert speedrun_rows.knn_interpolated(curve, 97.5 / 2, 0.25) == pytest.approx(25.0)  # halfway from chance
    assert speedrun_rows.knn_interpolated(curve, 3 * 97.5 + 97.5 / 2, 0.25) == pytest.approx(58.5)


def test_records_give_minutes_to_each_target_and_knn_at_each_budget():
    curves = _curve("recipe-e18-s1", [40 + e for e in range(18)])
    steps = {"recipe": StepTime(0.25, "bf16 box", "bf16-mixed", "measured")}
    runs = [("recipe-e18-s1", "recipe", "speedrun_cpu.yaml", 1)]
    (row,) = speedrun_rows.record_rows(runs, curves, steps, {"recipe-e18-s1": {"commit": "abc", "cpu": "x"}})
    assert row["final_knn"] == 57.0 and row["epochs"] == 18 and row["commit"] == "abc"
    assert row["s_to_50"] == 11 * 390 * 0.25 and row["s_to_55"] == 16 * 390 * 0.25
    assert row["s_to_60"] == "" and row["final_seconds"] == 18 * 390 * 0.25
    assert row["knn_at_30min"] == 57.0  # 1,755 s: the whole run fits in 30 minutes
    assert row["knn_at_2h"] == ""  # a 30-minute run says nothing of 2 hours
    table = report.records_table([row])
    assert "| recipe | 1 | 18 | 57.0 | 17.9 | 26.0 | - | - | - | 57.0 | - |" in table[2]
    assert speedrun_rows.record_rows(runs, curves, {}, {}) == []  # no step time on that machine: no row


def test_the_peer_target_is_the_peers_seconds_to_its_final_knn_over_ours_to_the_same_knn():
    """Per machine and seed: the first epoch of each at or above the peer's final kNN (seed 1's peer
    passed it at epoch 17, then fell back); a seed or machine without its mate gives no row, a kNN
    never reached no ratio."""
    peak = [30 + e for e in range(16)] + [49.5, 48.0, 48.5, 49.0]
    curves = _curve("peer-e20-s1", peak, 195) + _curve("ours-e18-s1", [40 + e for e in range(18)])
    curves += _curve("ours-e18-s2", [30] * 18)
    steps = {"peer": StepTime(1.0, "box", "bf16", "measured"), "ours": StepTime(0.25, "box", "bf16", "measured")}
    runs = [("peer-e20-s1", "peer", "p", 1), ("ours-e18-s1", "ours", "o", 1), ("ours-e18-s2", "ours", "o", 2)]
    runs += [("peer-e20-s2", "peer", "p", 2)]
    curves += _curve("peer-e20-s2", [30 + e for e in range(20)], 195)
    # a longer run of ours that went on from the 18-epoch one is the same training: one row per seed
    curves += _curve("ours-e40-s1", [40 + e for e in range(18)] + [58] * 22)
    runs += [("ours-e40-s1", "ours", "o", 1)]
    records = speedrun_rows.record_rows(runs, curves, steps, {})
    other = speedrun_rows.record_rows(runs[:2], curves, {"peer": steps["peer"]}, {})  # ours not timed there
    rows = speedrun_rows.speedup_rows(records + [{**r, "timed_on": "elsewhere"} for r in other], curves, "peer", "ours")
    assert [(r["seed"], r["timed_on"]) for r in rows] == [(1, "box"), (2, "box")]
    one, two = rows
    assert one["ours_run"] == "ours-e18-s1" and one["peer_final_knn"] == 49.0 and one["peer_seconds"] == 17 * 195 * 1.0
    assert one["ours_seconds"] == 10 * 390 * 0.25 and one["speedup"] == round(3315 / 975, 2)  # 49% at epoch 10
    assert two["peer_seconds"] == 20 * 195 * 1.0  # seed 2's peer reached its final kNN at its end
    assert two["ours_seconds"] == "" and two["speedup"] == ""  # seed 2 of ours never reached 49%
    table = report.speedup_table(rows)
    assert "| 1 | 49.0 | 55.2 | 16.2 | 3.40x | box |" in table and "never reached" in table[-1]


def test_a_lever_is_its_gain_at_the_reference_seconds_interpolated():
    curves = _curve("a-e3-s1", [40, 45, 50]) + _curve("b-e3-s1", [38, 44, 48]) + _curve("b-e3-s2", [40, 46, 50])
    # the changed setting's step is twice as slow: its 3 epochs take the reference's 6 epochs' time,
    # past the reference's last epoch: both are read at the reference's end (292.5 s), where the
    # changed one is halfway through its second epoch (42.5): 42.5 - 48 and 42.5 - 50
    steps = {"a": StepTime(0.5, "m", "32", "measured"), "b": StepTime(0.25, "m", "32", "measured")}
    levers = [settings.Lever("x", "a", "b", "a vs b")]
    (row,) = speedrun_rows.lever_rows(levers, {"a": ["a-e3-s1"], "b": ["b-e3-s1", "b-e3-s2"]}, curves, steps)
    assert row["gain_points_equal_seconds"] == -6.5 and row["step_ratio"] == 2.0
    assert row["knn_reference"] == 49.0 and row["seeds_reference"] == 2
    # a reference without a schedule lends its longer run: read at the changed one's 585 s (its epoch 6)
    longer = curves + _curve("b-e6-s1", [38, 44, 48, 50, 52, 53])
    (row,) = speedrun_rows.lever_rows(levers, {"a": ["a-e3-s1"], "b": ["b-e3-s1"]}, longer, steps, {"b": ["b-e6-s1"]})
    assert row["gain_points_equal_seconds"] == 50 - 53 and row["knn_reference"] == 48.0
    # at equal steps the screen reaches the changed side's seconds: seed 1 reads its screen (48 at
    # epoch 3), not its longer run that finished later (46 there); seed 3, with only a longer run,
    # lends that (47)
    longer += _curve("b-e9-s1", [36, 42, 46, 50, 51, 52, 53, 54, 55]) + _curve("b-e6-s3", [30, 40, 47, 49, 51, 52])
    steps["a"] = StepTime(0.25, "m", "32", "measured")  # equal steps: equal seconds at equal epochs
    both = {"b": ["b-e9-s1", "b-e6-s3"]}
    (row,) = speedrun_rows.lever_rows(levers, {"a": ["a-e3-s1"], "b": ["b-e3-s1"]}, longer, steps, both)
    assert row["gain_points_equal_seconds"] == 50 - (48 + 47) / 2 and row["seeds_reference"] == 1
    (row,) = speedrun_rows.lever_rows(levers, {"a": ["a-e3-s1"], "b": ["b-e3-s1", "b-e3-s2"]}, curves, steps)
    assert row["gain_points_equal_seconds"] == 1.0
    assert speedrun_rows.lever_rows(levers, {"a": ["a-e3-s1"]}, curves, steps) == []  # the reference not run yet
    assert "+1.00" in report.levers_table([row])[2]
    # a side without a step time: no gain at equal seconds, the difference at equal epochs, said so
    del steps["a"]
    assert speedrun_rows.lever_rows(levers, {"a": ["a-e3-s1"], "b": ["b-e3-s1", "b-e3-s2"]}, curves, steps) == []
    (untimed,) = speedrun_rows.untimed_rows(levers, {"a": ["a-e3-s1"], "b": ["b-e3-s1", "b-e3-s2"]}, curves, ["b"])
    assert (untimed["gain_points_equal_epochs"], untimed["step_not_timed"], untimed["seeds"]) == (1.0, "a", "1 / 2")
    assert speedrun_rows.untimed_rows(levers, {"a": ["a-e3-s1"], "b": ["b-e3-s1"]}, curves, ["a", "b"]) == []
    assert "| +1.00 | a |" in report.untimed_table([untimed])[2]


def test_step_times_are_measured_then_the_grids_step_then_a_ratio_to_the_recipe_or_the_baseline():
    own = [
        {"setting": "lars", "s_per_step": "0.6", "ratio_to_baseline": "0.75", "cpu": "avx2", "precision": "32-true"},
        {"setting": "baseline", "s_per_step": "0.8", "ratio_to_baseline": "1.0", "cpu": "avx2", "precision": "32-true"},
    ]
    claims = [
        {"method": "mabt", "m": "2", "d": "256", "width": "16", "s_per_step": "0.25", "cpu": "bf16", "precision": "bf"},
        {"method": "mabt", "m": "2", "d": "2048", "width": "16", "s_per_step": "0.4", "cpu": "bf16", "precision": "bf"},
    ]
    here = clock.step_times_on("avx2", own, claims)
    assert here["lars"] == StepTime(0.6, "avx2", "32-true", "measured") and REF not in here
    there = clock.step_times_on("bf16", own, claims)
    assert there[REF] == StepTime(0.25, "bf16", "bf", "claims grid's step")  # the same step as the grid's
    assert there["lars"].seconds == pytest.approx(0.75 * 0.4)  # not a grid step: its ratio x the baseline there
    assert there["lars"].basis == "ratio to the baseline on avx2"
    assert "mixres" not in there  # never measured anywhere
    # with the recipe measured beside it, a variant of the recipe is its ratio to the recipe x the
    # recipe's step there (a change that costs nothing costs nothing there too); the peer, not a
    # variant of the recipe, stays a ratio to the baseline
    own += [
        {"setting": t, "s_per_step": v, "ratio_to_baseline": r, "cpu": "avx2", "precision": "32-true"}
        for t, v, r in ((REF, "0.4", "0.5"), ("peer", "1.6", "2.0"), ("ramp@16", "0.12", "0.15"),
                        ("ramp@24", "0.24", "0.3"))
    ]  # fmt: skip
    there = clock.step_times_on("bf16", own, claims)
    assert there["lars"].seconds == pytest.approx(0.75 / 0.5 * 0.25)
    assert there["lars"].basis == f"ratio to the {REF} on avx2"
    assert there["peer"].seconds == pytest.approx(2.0 * 0.4) and there["peer"].basis == "ratio to the baseline on avx2"
    assert there["ramp"].seconds == pytest.approx((0.15 / 0.5 * 0.25 + 0.3 / 0.5 * 0.25 + 0.25 + 0.25) / 4)
    assert there["ramp-lr1e-3"].seconds == pytest.approx(there["ramp"].seconds)  # its twin's sides, carried


def test_a_ratio_to_the_recipe_pairs_rows_of_one_round_else_takes_the_recipes_median():
    """steps.csv keeps every round: the recipe's ratio to the baseline moves by 5-10% between
    rounds, so a setting's ratio is read against the recipe of its own round where it has one."""
    claims = [
        {"method": "mabt", "m": "2", "d": "256", "width": "16", "s_per_step": "0.25", "cpu": "bf16", "precision": "bf"},
        {"method": "mabt", "m": "2", "d": "2048", "width": "16", "s_per_step": "0.4", "cpu": "bf16", "precision": "bf"},
    ]
    rounds = [("A", REF, "0.5"), ("A", "d128", "0.55"), ("B", "lars", "0.9"), ("C", REF, "0.6")]
    rounds += [("D", REF, "0.7")]
    own = [
        {"setting": t, "s_per_step": "1", "ratio_to_baseline": r, "cpu": "avx2", "precision": "32", "date": d}
        for d, t, r in rounds
    ]
    there = clock.step_times_on("bf16", own, claims)
    assert there["d128"].seconds == pytest.approx(0.55 / 0.5 * 0.25)  # round A's recipe, not the latest (0.7)
    assert there["d128"].basis == f"ratio to the {REF} on avx2"
    assert there["lars"].seconds == pytest.approx(0.9 / 0.6 * 0.25)  # no recipe in round B: its median
    assert there["lars"].basis == f"ratio to the {REF} on avx2 (the {REF}'s median over 3 rounds)"


def test_on_a_machine_with_several_calls_the_reference_is_their_median_and_the_rest_a_ratio_in_their_call():
    """On the Xeon the recipe's step read 0.23 to 0.34 s over six quiet calls, and LARS (its network,
    another optimizer) 0.23 to 0.31: each setting is its ratio to the reference in its latest call
    that timed both, times the reference's median, so no ratio mixes two calls."""
    rounds = [("A", REF, "0.25"), ("A", "w24", "0.6"), ("A", "ramp@16", "0.1"), ("B", "lars", "0.4")]
    rounds += [("C", REF, "0.3"), ("C", "d128", "0.28"), ("D", REF, "0.32"), ("E", "w24", "0.9")]
    own = [
        {"setting": t, "s_per_step": v, "ratio_to_baseline": "1", "cpu": "x", "precision": "bf", "date": d}
        for d, t, v in rounds
    ]
    here = clock.step_times_on("x", own, [])
    assert here[REF] == StepTime(0.3, "x", "bf", "median of 3 calls")
    assert here["lr2e-3"] == StepTime(0.3, "x", "bf", f"{REF}'s step, median of 3 calls")  # the same work
    assert here["w24"].seconds == pytest.approx(0.6 / 0.25 * 0.3)  # call E timed no reference
    assert here["w24"].basis == f"its ratio to the {REF} in its call x the {REF}'s median"
    assert here["d128"].seconds == pytest.approx(0.28)  # timed beside the median's own call
    assert here["ramp@16"].seconds == pytest.approx(0.1 / 0.25 * 0.3)  # a ramp's side too
    assert here["ramp-lr1e-3@16"].seconds == here["ramp@16"].seconds  # and its twin's, carried over
    assert here["lars"] == StepTime(0.4, "x", "bf", "measured")  # no reference in its call: as measured
    single = clock.step_times_on("x", own[:2], [])  # one call: every step as measured
    assert single["w24"] == StepTime(0.6, "x", "bf", "measured") and single[REF].basis == "measured"


def test_a_resolution_ramps_step_is_the_mean_of_its_epochs_sides_each_timed_beside_the_recipe():
    own = [
        {"setting": t, "s_per_step": v, "ratio_to_baseline": "1", "cpu": "avx2", "precision": "32-true"}
        for t, v in (("baseline", "1.5"), (REF, "1.0"), ("ramp@16", "0.3"), ("ramp@24", "0.6"))
    ]
    ramp = settings.SETTINGS["ramp"]
    assert ramp.sides(ramp.screen_epochs) == [16, 24, 32, 32]
    step = clock.step_times_on("avx2", own, [])["ramp"]
    assert step.seconds == pytest.approx((0.3 + 0.6 + 1.0 + 1.0) / 4)
    assert step.basis == "mean of its epochs' sides 16/24/32/32 px (measured)"
    assert "ramp" not in clock.step_times_on("avx2", own[:3], [])  # 24 px not timed: no step
    # the same ramp at another lr does the same work: its sides are the ramp's, named as such
    twin = clock.step_times_on("avx2", own, [])["ramp-lr1e-3"]
    assert twin.seconds == pytest.approx(step.seconds) and "ramp@16's step, measured" in twin.basis
    assert "+memory.resolution.start=16" in ramp.screen().extra and ramp.screen().name(1) == "ramp-e4-s1"


def test_every_screen_is_named_for_its_setting_and_levers_name_settings():
    names = [settings.SETTINGS[t].screen().name(seed) for t in settings.SCREEN for seed in (1, 2)]
    assert len(names) == len(set(names)) and "ramp-e4-s2" in names and f"{REF}-e3-s1" in names
    assert [settings.setting_of(n) for n in names[::2]] == list(settings.SCREEN)
    assert {t for lever in settings.LEVERS for t in (lever.changed, lever.reference)} <= set(settings.SETTINGS)


def test_a_settings_overrides_replace_the_grids_and_fit_the_warm_up_to_its_epochs(tiny_cifar, monkeypatch):
    monkeypatch.setenv("CIFAR10_DIR", str(Path(tiny_cifar["train"]).parent))  # the overrides name the data
    recipe, extra = grid.overrides(CPU, settings.SETTINGS["cos-lr2e-3"].point(3), 1)
    assert recipe == "speedrun_cpu.yaml" and "scheduler.name=warmup_cosine" in extra
    assert extra.count("optimizer.lr=2e-3") == 1 and "++scheduler.warmup_epochs=0.3" in extra
    assert "max_epochs=3" in extra
    _, peer = grid.overrides(CPU, settings.SETTINGS["peer"].point(20), 1)
    assert [o for o in peer if o.startswith("method_kwargs.lamb")] == ["method_kwargs.lamb=0.0051"]
    assert "method=barlow_twins" in peer and "++scheduler.warmup_epochs=0.2" in peer
    _, const = grid.overrides(CPU, settings.SETTINGS[REF].point(3), 1)
    assert not any(o.startswith("scheduler.") for o in const)  # the recipe's own: a constant lr


def test_the_peers_checkpoint_is_predicted_with_larss_one_momentum_not_adams_two(tiny_cifar, monkeypatch):
    """Whether a run can be carried to another machine is decided on this prediction: the peer's
    20-epoch checkpoint (LARS) measured 71.6 MiB, where Adam's two moments would predict 107.7."""
    monkeypatch.setenv("CIFAR10_DIR", str(Path(tiny_cifar["train"]).parent))
    peer = runner.checkpoint_mib(CPU, settings.SETTINGS["peer"].point(20))
    ours = runner.checkpoint_mib(CPU, settings.SETTINGS[REF].point(20))
    assert abs(peer - 71.6) < 1.0 and runner.CARRY_MAX_MB < peer
    assert abs(ours - 10.05) < 0.5  # the recipe's measured checkpoint (Adam)


def test_every_setting_on_the_recipe_names_its_lr_so_the_yamls_lr_changes_none(tiny_cifar, monkeypatch):
    """Levers were screened at the yaml's lr of the time; when the yaml takes a lever's lr, a
    setting that relied on the yaml's would change its training under its old runs' rows."""
    monkeypatch.setenv("CIFAR10_DIR", str(Path(tiny_cifar["train"]).parent))
    for tag, setting in settings.SETTINGS.items():
        _, extra = grid.overrides(CPU, setting.point(3), 1)
        lrs = [o for o in extra if grid.override_key(o) == "optimizer.lr"]
        own = [o for o in setting.overrides if grid.override_key(o) == "optimizer.lr"]
        if setting.recipe == settings.RECIPE:
            assert lrs == (own or [f"optimizer.lr={settings.SCREEN_LR:g}"]), tag
        else:
            assert lrs == own, tag  # the peer: its own recipe's lr
    assert grid.overrides(CPU, settings.SETTINGS["lr2e-3"].point(3), 1)[1].count("optimizer.lr=2e-3") == 1
    # the yaml a user runs is RECIPE_SETTING's training (the record the README shows first), not the reference's
    from mvssl_plugin.cli.config_name import compose_recipe

    yaml_lr = compose_recipe(settings.RECIPE, "pretrain", []).optimizer.lr
    (own,) = [o for o in settings.SETTINGS[settings.RECIPE_SETTING].overrides if grid.override_key(o) == "optimizer.lr"]
    assert float(own.split("=", 1)[1]) == yaml_lr != settings.SCREEN_LR


def test_the_batch_augmentation_beta_compile_and_ramp_levers_change_what_they_say(tiny_cifar, monkeypatch):
    """Each lever's overrides pass the plugin's checks (as a launch runs them, before the model is
    built) and set what the lever says: batch, crop scale, beta (by the rule, from its constant)."""
    from solo.methods.base import BaseMethod

    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.config import adapt_to_hardware
    from mvssl_plugin.registry import register
    from mvssl_plugin.train.checks import check_pretrain_cfg

    monkeypatch.setenv("CIFAR10_DIR", str(Path(tiny_cifar["train"]).parent))
    checked = {}
    for tag in (REF, "b256", "crop0.2", "jitter0.5", "beta2x", "compile", "ramp"):
        recipe, extra = grid.overrides(CPU, settings.SETTINGS[tag].point(3), 1)
        cfg = compose_recipe(recipe, "pretrain", extra)
        adapt_to_hardware(cfg)
        check_pretrain_cfg(cfg, register(), BaseMethod._BACKBONES, tuple(BaseMethod._OPTIMIZERS))
        checked[tag] = cfg
    recipe_cfg = checked[REF]
    assert recipe_cfg.optimizer.batch_size == 128 and checked["b256"].optimizer.batch_size == 256
    assert recipe_cfg.augmentations[0].rrc.crop_min_scale == 0.08
    assert checked["crop0.2"].augmentations[0].rrc.crop_min_scale == 0.2
    jitter, half = recipe_cfg.augmentations[0].color_jitter, checked["jitter0.5"].augmentations[0].color_jitter
    for key in ("brightness", "contrast", "saturation", "hue"):
        assert half[key] == pytest.approx(jitter[key] / 2)
    assert half.prob == jitter.prob
    assert checked["beta2x"].method_kwargs.lamb == pytest.approx(2 * recipe_cfg.method_kwargs.lamb)
    assert checked["beta2x"].method_kwargs.lamb == pytest.approx(6.6 / 256)
    assert checked["compile"].performance.compile and not recipe_cfg.performance.get("compile", False)
    assert checked["ramp"].memory.resolution.start == 16 and checked["ramp"].data.format == "memory"
    # the 2-hour tail run: the yaml's constant lr 2e-3, falling to zero over the last 15 of 74 epochs
    recipe, extra = grid.overrides(CPU, settings.SETTINGS["lr2e-3-tail"].point(74), 1)
    tail = compose_recipe(recipe, "pretrain", extra)
    adapt_to_hardware(tail)
    check_pretrain_cfg(tail, register(), BaseMethod._BACKBONES, tuple(BaseMethod._OPTIMIZERS))
    assert (tail.scheduler.name, tail.scheduler.tail_epochs, tail.optimizer.lr) == ("none", 15, 2e-3)
    # the batch lever doubles the CPU's batch, once; the others keep the recipe's
    batches = {t: [o for o in grid.overrides(CPU, settings.SETTINGS[t].point(3), 1)[1] if "batch_size" in o]
               for t in (REF, "b256")}  # fmt: skip
    assert batches == {REF: [], "b256": ["optimizer.batch_size=256"]}


@pytest.mark.slow
@pytest.mark.parametrize("tag", ["cos-lr1e-3", "peer"])
def test_a_setting_trains_through_main_pretrain_and_its_schedule_ends_at_the_budget(
    tag, tiny_cifar, tmp_path, monkeypatch, one_thread
):
    """The harness's own overrides of a setting at 2 epochs, on tiny data (3 steps an epoch):
    the warm-up-cosine schedule solo-learn builds from max_epochs has taken all 6 steps and ends
    at lr 0, with the warm-up fitted to the run's epochs (the levers' 10%; the peer's 1%)."""
    monkeypatch.setenv("CIFAR10_DIR", str(Path(tiny_cifar["train"]).parent))
    recipe, extra = grid.overrides(CPU, settings.SETTINGS[tag].point(2), 1)
    tiny = {"checkpoint.dir": str(tmp_path), "optimizer.batch_size": "8", "backbone.kwargs.width": "8"}
    extra = [o for o in extra if grid.override_key(o) not in tiny] + [f"{k}={v}" for k, v in tiny.items()]
    result = run_entry("main_pretrain.py", ["--config-name", recipe, *extra], cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (ckpt,) = tmp_path.rglob("*ep=1.ckpt")
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    (scheduler,) = state["lr_schedulers"]
    assert scheduler["last_epoch"] == scheduler["max_epochs"] == 6  # every step of the budget taken
    assert scheduler["warmup_epochs"] == pytest.approx(6 * (0.01 if tag == "peer" else 0.1))
    assert max(scheduler["_last_lr"]) == pytest.approx(0.0, abs=1e-12)


def test_the_report_writes_its_csvs_summary_plot_and_both_tables_from_made_up_runs(tmp_path):
    from mvssl_plugin.files import read_csv, write_csv

    out = tmp_path / "speedrun"
    out.mkdir()
    runs = {
        "cos-lr5e-4-e3-s1": [45, 50, 53],
        f"{REF}-e3-s1": [44, 47, 49],
        f"{REF}-e18-s1": [44, 47, 49] + [47 + e for e in range(3, 18)],  # no schedule: the screen is its start
    }
    write_csv(out / "curves.csv", [{**r, "seed": "1"} for run, knn in runs.items() for r in _curve(run, knn)])
    write_csv(out / "results.csv", [{"run": run, "seed": "1", "commit": "abc"} for run in runs])
    # steps measured on two more machines: one of the targets' kind (2 cores, bf16 native), one not
    box, old = "Box, 2 cores, bf16 native", "Old, 2 cores, bf16 not native"
    write_csv(out / "steps.csv", [
        {"setting": tag, "s_per_step": s, "ratio_to_baseline": r, "cpu": cpu, "precision": "p", "date": "d"}
        for cpu, steps in ((box, (("baseline", "0.5", "1.0"), (REF, "0.3", "0.6"))),
                           (old, (("baseline", "1.5", "1.0"), (REF, "1.0", "0.67"))))
        for tag, s, r in steps
    ])  # fmt: skip
    readme, doc = tmp_path / "README.md", tmp_path / "speedrun.md"
    readme.write_text(f"# x\n{report.RECORDS_START}\nold\n{report.END}\ntail\n")
    doc.write_text(f"# y\n{report.LEVERS_START}\n{report.END}\n")
    report.report(out, readme, doc)
    # the target machine's clock: the claims grid's own m = 2, d = 256 step (its step_times.csv)
    (record,) = [r for r in read_csv(out / "records.csv") if r["timed_on"] == report.TARGET_MACHINE]
    assert record["run"] == f"{REF}-e18-s1" and record["basis"] == "claims grid's step"  # screens are not records
    text = readme.read_text()
    assert "old" not in text and text.endswith(f"{report.END}\ntail\n") and f"| {REF} | 1 | 18 | 64.0 |" in text
    # the README's records: timed on each machine of the targets' kind, the target machine first
    shown = [line for line in text.splitlines() if line.startswith(f"| {REF} |")]
    assert [line.split("| ")[-1].split(" (")[0] for line in shown] == [report.TARGET_MACHINE, box]
    assert f"| {REF} | 1 | 18 | 64.0 | {4 * 390 * 0.3 / 60:.1f} |" in text and old not in text  # 50% at epoch 4
    assert "The peer's full run has not finished yet." in text and (out / "peer.csv").is_file()
    (lever,) = [r for r in read_csv(out / "levers.csv") if r["timed_on"] == report.TARGET_MACHINE]
    assert (lever["lever"], lever["gain_points_equal_seconds"]) == ("schedule", "4.0")  # equal steps: 53 - 49
    assert f"| schedule: warm-up + cosine to zero vs constant, same peak lr | cos-lr5e-4 | {REF} |" in doc.read_text()
    assert (out / "knn_vs_minutes.png").is_file() and f"| {REF} | 1 | 18 |" in (out / "summary.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["speedrun_cpu.yaml", "solo_barlow_cifar_cpu.yaml"])
def test_the_recipes_train_as_a_user_runs_them(recipe, tiny_cifar, tmp_path, one_thread):
    """``python main_pretrain.py --config-name <recipe>`` on tiny data, a few steps."""
    from helpers import tiny_overrides

    overrides = [o.lstrip("+") for o in tiny_overrides(tiny_cifar, tmp_path) if "proj_output_dim" not in o]
    overrides.append("data.val_fraction=-1")  # 10% of 12 test images would be 1 image for 3 classes
    result = run_entry("main_pretrain.py", ["--config-name", recipe, *overrides], cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (args,) = tmp_path.rglob("args.json")
    assert list(args.parent.glob("*.ckpt"))


def test_the_claims_baseline_is_timed_with_the_step_measured_beside_the_settings_where_there_is_one(tmp_path):
    """On a machine that timed the speedrun's settings, the baseline takes the step measured in that
    same round (its ratios to the settings are side by side); elsewhere the claims grid's own."""
    from mvssl_plugin.files import read_csv, write_csv

    name = settings.BASELINE.name(1)
    write_csv(tmp_path / "curves.csv", _curve(name, [40, 50, 56]))
    write_csv(tmp_path / "results.csv", [{"run": name, "commit": "c1", "cpu": "A", "precision": "32-true"}])
    own = [{"setting": "baseline", "s_per_step": "2.0", "precision": "32", "cpu": "A"}]
    grid_row = {"method": "mabt", "m": "2", "d": "2048", "width": "16", "s_per_step": "0.5", "precision": "bf16"}
    claims = [{**grid_row, "cpu": "A", "s_per_step": "9.9"}, {**grid_row, "cpu": "B"}]
    rows = report.baseline_rows(
        ["A", "B", "C"], own, claims, read_csv(tmp_path / "curves.csv"), read_csv(tmp_path / "results.csv")
    )
    assert [(r["timed_on"], r["s_per_step"], r["basis"]) for r in rows] == [
        ("A", 2.0, "measured beside the settings"),
        ("B", 0.5, "claims grid's step"),
    ]  # C: no step anywhere, no row; the second seed has no curve, no row
    assert rows[0]["s_to_50"] == 2 * 390 * 2.0 and rows[1]["s_to_55"] == 3 * 390 * 0.5
    # where the reference was timed in several calls: the baseline's ratio to it in its latest call
    # x the reference's median, the scale every setting is on there
    calls = [("D1", "baseline", "0.5"), ("D1", REF, "0.25"), ("D2", REF, "0.3"), ("D3", "baseline", "0.52")]
    calls += [("D3", REF, "0.2")]
    own = [{"setting": t, "s_per_step": v, "precision": "bf", "cpu": "X", "date": d} for d, t, v in calls]
    step = clock.baseline_step("X", own, [])
    assert step.seconds == pytest.approx(0.52 / 0.2 * 0.25) and step.basis.endswith(f"the {REF}'s median")
