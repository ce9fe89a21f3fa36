"""``scheduler.warmup_minutes``, ``scheduler.tail_epochs``, ``scheduler.tail_minutes`` and
``scheduler.cycle_minutes`` as a user sets them: checked before any work, and through
main_pretrain.py a constant lr that rises linearly from zero over the first training minutes, and
falls linearly to zero over the last epochs (also in a run that goes on from a constant run's
checkpoint, which holds no scheduler state) or over the last minutes of the run's time budget, or
of every cycle of it, on its training clock."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from helpers import assert_one_line, checked_config, run_entry, tiny_overrides

from mvssl_plugin.config import check_training_keys
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.files import read_csv, read_json
from mvssl_plugin.lr_ramps import cycle_position, tail_factor
from mvssl_plugin.runs import EPOCH_KNN
from mvssl_plugin.train.lr_ramp_callback import BASE_LR, LrRamps

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        ({"++scheduler.tail_epochs": 3, "max_epochs": 2}, "tail_epochs=3: must be an integer in [0, max_epochs=2]"),
        ({"++scheduler.tail_epochs": -1}, "must be an integer in [0, max_epochs"),
        ({"++scheduler.tail_epochs": 1, "scheduler.name": "warmup_cosine"}, "set scheduler.name=none"),
        (  # the recipe's 30-minute budget taken away
            {"++scheduler.tail_minutes": 20, "epoch_knn.stop_after_minutes": "null"},
            "this run has none: set epoch_knn.enabled=true and epoch_knn.stop_after",
        ),
        ({"++scheduler.tail_minutes": 20, "epoch_knn.enabled": False, "epoch_knn.stop_after_minutes": 60}, "has none"),
        ({"++scheduler.tail_minutes": 20, "epoch_knn.stop_after_minutes": 10}, "longer than the budget"),
        ({"++scheduler.tail_minutes": -1, "epoch_knn.stop_after_minutes": 10}, "give training minutes >= 0"),
        (
            {"++scheduler.tail_minutes": 5, "epoch_knn.stop_after_minutes": 10, "++scheduler.tail_epochs": 1},
            "choose one tail",
        ),
        (
            {"++scheduler.tail_minutes": 5, "epoch_knn.stop_after_minutes": 10, "scheduler.name": "warmup_cosine"},
            "set scheduler.name=none, or scheduler.tail_minutes=0",
        ),
        ({"++scheduler.warmup_minutes": -2}, "scheduler.warmup_minutes=-2: give training minutes >= 0"),
        ({"++scheduler.warmup_minutes": "two"}, "scheduler.warmup_minutes='two': give training minutes >= 0"),
        ({"++scheduler.warmup_minutes": 2, "scheduler.name": "warmup_cosine"}, "or scheduler.warmup_minutes=0"),
        (
            {"++scheduler.warmup_minutes": 6, "++scheduler.tail_minutes": 5, "epoch_knn.stop_after_minutes": 10},
            "overlap in the budget, epoch_knn.stop_after_minutes=10: give a warm-up of at most 5 minutes",
        ),
        (
            {"++scheduler.cycle_minutes": 20, "epoch_knn.stop_after_minutes": 60},
            "scheduler.cycle_minutes=20 repeats the tail in every cycle: give scheduler.tail_minutes in (0, 20]",
        ),
        (
            {"++scheduler.cycle_minutes": 10, "++scheduler.tail_minutes": 20, "epoch_knn.stop_after_minutes": 60},
            "give scheduler.tail_minutes in (0, 10]",
        ),
        (
            {"++scheduler.cycle_minutes": 25, "++scheduler.tail_minutes": 20, "epoch_knn.stop_after_minutes": 60},
            "does not divide the budget, epoch_knn.stop_after_minutes=60, so the run would stop inside a cycle: "
            "give a budget of 50 minutes",
        ),
        ({"++scheduler.cycle_minutes": -5}, "scheduler.cycle_minutes=-5: give training minutes >= 0"),
        (
            {
                "++scheduler.cycle_minutes": 20,
                "++scheduler.tail_minutes": 20,
                "epoch_knn.stop_after_minutes": 60,
                "++scheduler.warmup_minutes": 3,
            },
            "overlap in the first cycle, scheduler.cycle_minutes=20: the tail fills it: give a shorter scheduler.tail",
        ),  # fmt: skip
        (
            {
                "++scheduler.cycle_minutes": 20,
                "++scheduler.tail_minutes": 20,
                "epoch_knn.stop_after_minutes": 60,
                "scheduler.name": "warmup_cosine",
            },
            "set scheduler.name=none, or scheduler.tail_minutes=0",
        ),  # fmt: skip
    ],
)
def test_a_ramp_the_run_cannot_take_is_refused_naming_the_fix(overrides, fragment):
    cfg = checked_config("speedrun_mabt_cpu.yaml", "cpu", **overrides)
    with pytest.raises(ConfigError) as error:
        check_training_keys(cfg, ("adam", "lars", "sgd", "adamw"))
    assert fragment in str(error.value)


def test_counted_in_minutes_the_lr_follows_the_training_clock():
    """A 60-minute budget, its last 20 the tail: the full lr before minute 40, half at 50, none
    in the epoch that runs past the budget."""
    clock = SimpleNamespace(seconds=0.0)
    tail = LrRamps(tail_minutes=20, budget_minutes=60, clock=SimpleNamespace(train_now=lambda: clock.seconds))
    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([{"params": [weight], "lr": 0.1}, {"params": [], "lr": 0.02}])
    seen = []
    for minutes in (10, 40, 50, 59, 60.5):
        clock.seconds = 60.0 * minutes
        tail.on_train_batch_start(SimpleNamespace(optimizers=[optimizer]), None, None, 0)
        seen.append([group["lr"] for group in optimizer.param_groups])
    expected = [[0.1, 0.02], [0.1, 0.02], [0.05, 0.01], [0.005, 0.001], [0.0, 0.0]]
    assert seen == [pytest.approx(e) for e in expected]


def test_in_cycles_the_tail_ends_every_cycle_and_the_lr_starts_again():
    """A 60-minute budget in 20-minute cycles, each all tail: the full lr at 0, 20 and 40, half at
    10, 30 and 50, none past the budget; cycles of 20 with a 5-minute tail hold the lr until 15."""
    clock = SimpleNamespace(seconds=0.0)
    cycles = LrRamps(tail_minutes=20, cycle_minutes=20, budget_minutes=60,
                     clock=SimpleNamespace(train_now=lambda: clock.seconds))  # fmt: skip
    short = LrRamps(tail_minutes=5, cycle_minutes=20, budget_minutes=60,
                    clock=SimpleNamespace(train_now=lambda: clock.seconds))  # fmt: skip
    trainer = SimpleNamespace(global_step=0)
    seen = []
    for minutes in (0, 10, 19, 20, 30, 40, 50, 59, 60.5):
        clock.seconds = 60.0 * minutes
        seen.append((cycles.factor(trainer), short.factor(trainer)))
    assert [c for c, _ in seen] == pytest.approx([1, 0.5, 0.05, 1, 0.5, 1, 0.5, 0.05, 0])
    assert [s for _, s in seen] == pytest.approx([1, 1, 0.2, 1, 1, 1, 1, 0.2, 0])
    assert cycle_position(1500.0, 3600.0, 0.0) == (1500.0, 3600.0)  # no cycle: the budget is one
    with pytest.raises(ValueError, match="whole number of cycles of 25"):
        cycle_position(0.0, 60.0, 25.0)
    with pytest.raises(ValueError, match="must fit in a cycle"):
        LrRamps(tail_minutes=20, cycle_minutes=10, budget_minutes=60, clock=clock)
    with pytest.raises(ValueError, match="cycle_minutes repeats the tail"):
        LrRamps(warmup_minutes=2, cycle_minutes=10, budget_minutes=60, clock=clock)


@pytest.mark.parametrize(
    "overrides, text",
    [
        ({}, "constant"),
        ({"scheduler.name": "warmup_cosine"}, "warmup_cosine"),
        (
            {"++scheduler.warmup_minutes": 2, "++scheduler.tail_minutes": 20, "epoch_knn.stop_after_minutes": 60},
            "constant, linear from zero over the first 2 training minutes, linear to zero over the last 20 "
            "training minutes of the 60-minute budget",
        ),
        (
            {"++scheduler.tail_minutes": 20, "++scheduler.cycle_minutes": 20, "epoch_knn.stop_after_minutes": 60},
            "constant, linear to zero over the last 20 training minutes of every 20-minute cycle of the 60-minute "
            "budget",
        ),
        ({"++scheduler.tail_epochs": 3}, "constant, linear to zero over the last 3 epochs"),
    ],
)
def test_the_start_block_says_the_lrs_schedule(overrides, text):
    from mvssl_plugin.train.start_block import schedule_text

    assert schedule_text(checked_config("speedrun_mabt_cpu.yaml", "cpu", **overrides)) == text


def test_the_warm_up_and_the_tail_multiply_on_one_clock():
    """A 60-minute budget with a 5-minute warm-up and a 20-minute tail: a fifth of the lr at minute
    1, all of it from 5 to 40, half at 50."""
    clock = SimpleNamespace(seconds=0.0)
    ramps = LrRamps(warmup_minutes=5, tail_minutes=20, budget_minutes=60,
                    clock=SimpleNamespace(train_now=lambda: clock.seconds))  # fmt: skip
    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([weight], lr=0.01)
    seen = []
    for minutes in (0, 1, 5, 39, 50):
        clock.seconds = 60.0 * minutes
        ramps.on_train_batch_start(SimpleNamespace(optimizers=[optimizer], global_step=0), None, None, 0)
        seen.append(optimizer.param_groups[0]["lr"])
    assert seen == pytest.approx([0.0, 0.002, 0.01, 0.01, 0.005])
    assert optimizer.param_groups[0][BASE_LR] == 0.01


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({}, "give a warm-up or a tail"),
        ({"tail_minutes": 5}, "tail_minutes needs budget_minutes"),
        ({"tail_minutes": 5, "budget_minutes": 9}, "minutes need the run's clock"),
        ({"warmup_minutes": 2}, "minutes need the run's clock"),
        ({"tail_epochs": 2, "tail_minutes": 5, "budget_minutes": 9}, "not both"),
    ],
)
def test_a_ramp_needs_a_length_and_minutes_need_a_clock(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        LrRamps(**kwargs)


def _lrs(ckpt) -> tuple:
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    groups = state["optimizer_states"][0]["param_groups"]
    return state["global_step"], [g["lr"] for g in groups], [g.get(BASE_LR) for g in groups], state["lr_schedulers"]


@pytest.mark.slow
def test_a_run_goes_on_from_a_constant_runs_checkpoint_into_its_tail(tiny_cifar, tmp_path):
    """One constant epoch, then a launch of 3 epochs with a 2-epoch tail resuming its checkpoint
    (as the speedrun's tail runs go on from their constant twin): epoch 2 ends inside the tail,
    epoch 3 at the last step's 1 / tail_steps of the constant lr."""
    tiny = [o.lstrip("+") for o in tiny_overrides(tiny_cifar, tmp_path) if "proj_output_dim" not in o]
    tiny.append("data.val_fraction=-1")
    first = run_entry("main_pretrain.py", ["--config-name", "speedrun_mabt_cpu.yaml", *tiny, "name=constant"], tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    (constant,) = tmp_path.rglob("*ep=0.ckpt")
    per_epoch, lrs, bases, schedulers = _lrs(constant)
    assert schedulers == [] and set(bases) == {None}  # a constant run: no scheduler, no tail
    constant_lrs = lrs
    go_on = [
        *[o for o in tiny if not o.startswith("max_epochs")],
        "max_epochs=3",
        "++scheduler.tail_epochs=2",
        "++checkpoint.keep_prev=true",
        f"+resume_from_checkpoint='{constant}'",
        "auto_resume.accept_changes=true",
        "name=constant",
    ]
    result = run_entry("main_pretrain.py", ["--config-name", "speedrun_mabt_cpu.yaml", *go_on], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    total, tail = 3 * per_epoch, 2 * per_epoch
    for epoch in (1, 2):
        (ckpt,) = tmp_path.rglob(f"*ep={epoch}.ckpt")
        step, lrs, bases, _ = _lrs(ckpt)
        assert step == (epoch + 1) * per_epoch
        assert bases == constant_lrs  # the tail scales the constant run's lr (each group's own)
        factor = tail_factor(step - 1, total, tail)  # the lr of the epoch's last step
        assert lrs == pytest.approx([b * factor for b in bases])
    assert factor == pytest.approx(1 / tail) and 0 < factor < 1
    # the encoder taken out of the run says so
    import json

    from mvssl_plugin.encoder.export import export

    out = export(ckpt, tmp_path / "encoder", notify=lambda _: None)
    assert json.loads((out / "config.json").read_text())["training"]["lr_tail_epochs"] == 2
    assert "lr linear to zero over the last 2 epochs" in (out / "README.md").read_text()


def _ramped_run(tiny_cifar, tmp_path, ramp: list) -> tuple:
    """speedrun_mabt_cpu.yaml for 2 epochs with the ``ramp`` overrides: each epoch's training seconds at
    its end (epoch_knn.csv), the lr factor its checkpoint holds (every group by the same one, no
    torch scheduler), and the card of the encoder exported from the last checkpoint."""
    tiny = [o.lstrip("+") for o in tiny_overrides(tiny_cifar, tmp_path) if "proj_output_dim" not in o]
    args = [
        *[o for o in tiny if not o.startswith("max_epochs")],
        "max_epochs=2",
        "data.val_fraction=-1",
        *ramp,
        "++checkpoint.keep_prev=true",
        "name=ramped",
    ]
    result = run_entry("main_pretrain.py", ["--config-name", "speedrun_mabt_cpu.yaml", *args], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    (knn,) = tmp_path.rglob(EPOCH_KNN)
    seconds = [float(r["train_seconds"]) for r in read_csv(knn)]
    factors = []
    for epoch in (0, 1):
        (ckpt,) = tmp_path.rglob(f"*ep={epoch}.ckpt")
        _, lrs, bases, schedulers = _lrs(ckpt)
        assert schedulers == [] and None not in bases
        factor = lrs[0] / bases[0]
        assert lrs == pytest.approx([b * factor for b in bases])  # every group by the same factor
        factors.append(factor)
    from mvssl_plugin.encoder.export import export

    out = export(ckpt, tmp_path / "encoder", notify=lambda _: None)
    return seconds, factors, (out / "README.md").read_text()


@pytest.mark.slow
def test_a_time_budgets_tail_lowers_the_lr_with_the_training_clock(tiny_cifar, tmp_path):
    """A 10-minute budget, all of it the tail: a step at training second t takes the constant lr x
    (1 - t / 600), so each epoch ends below the last one's lr, and no lower than its clock at the
    epoch's end (epoch_knn.csv) allows; the encoder's card says so."""
    ramp = ["epoch_knn.stop_after_minutes=10", "++scheduler.tail_minutes=10"]
    seconds, factors, card = _ramped_run(tiny_cifar, tmp_path, ramp)
    for epoch in (0, 1):
        assert 1 - seconds[epoch] / 600 <= factors[epoch] < 1
    assert factors[1] < factors[0]
    assert "lr linear to zero over the last 10 training minutes" in card


@pytest.mark.slow
def test_cycles_start_the_tail_at_the_first_cycles_start(tiny_cifar, tmp_path):
    """A 10-minute budget in 5-minute cycles, each all tail: the run's seconds lie in the first
    cycle, where the tail alone (its last 5 minutes) would leave the lr whole; so each epoch ends
    below the constant lr by at least its clock allows, 1 - t / 300; the encoder's card says so."""
    ramp = ["epoch_knn.stop_after_minutes=10", "++scheduler.tail_minutes=5", "++scheduler.cycle_minutes=5"]
    seconds, factors, card = _ramped_run(tiny_cifar, tmp_path, ramp)
    assert seconds[1] < 300  # both epochs inside the first cycle
    for epoch in (0, 1):
        assert 1 - seconds[epoch] / 300 <= factors[epoch] < 1
    assert factors[1] < factors[0]
    assert "lr linear to zero over the last 5 training minutes of every 5-minute cycle" in card
    (args,) = tmp_path.rglob("args.json")  # the start block's facts, as the run printed them
    assert (
        "5 training minutes of every 5-minute cycle of the 10-minute budget"
        in read_json(args)["run_summary"]["optimizer"]
    )


@pytest.mark.slow
def test_a_warm_up_raises_the_lr_with_the_training_clock(tiny_cifar, tmp_path):
    """A 10-minute warm-up and no budget: a step at training second t takes the constant lr x
    t / 600, so each epoch ends above the last one's lr, and no higher than its clock at the
    epoch's end allows; the encoder's card says so."""
    seconds, factors, card = _ramped_run(tiny_cifar, tmp_path, ["++scheduler.warmup_minutes=10"])
    for epoch in (0, 1):
        assert 0 < factors[epoch] <= seconds[epoch] / 600
    assert factors[1] > factors[0]
    assert "lr linear from zero over the first 10 training minutes" in card


@pytest.mark.slow
def test_a_bad_tail_stops_main_pretrain_in_one_line(tiny_cifar, tmp_path):
    tiny = [o.lstrip("+") for o in tiny_overrides(tiny_cifar, tmp_path) if "proj_output_dim" not in o]
    args = ["--config-name", "speedrun_mabt_cpu.yaml", *tiny, "++scheduler.tail_epochs=2"]
    assert_one_line(run_entry("main_pretrain.py", args, tmp_path), 2, "scheduler.tail_epochs=2: must be an integer")
