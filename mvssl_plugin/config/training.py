"""Optimizer, scheduler, precision, checkpoint and signal keys: the numbers solo-learn
would otherwise reject deep inside torch, Lightning or its own asserts, or silently misuse."""

from __future__ import annotations

from omegaconf import DictConfig

from mvssl_plugin.config.values import (
    AUTO,
    Rule,
    apply_rules,
    count,
    is_int,
    is_number,
    non_negative,
    positive,
    require,
    select,
)
from mvssl_plugin.errors import ConfigError

TRAINING_RULES: tuple[Rule, ...] = (
    ("optimizer.lr", positive, "must be a number > 0"),
    ("optimizer.classifier_lr", positive, "must be a number > 0"),
    ("optimizer.weight_decay", non_negative, "must be a number >= 0"),
    ("scheduler.warmup_epochs", non_negative, "must be a number >= 0"),
    ("scheduler.min_lr", non_negative, "must be a number >= 0"),
    ("data.num_workers", lambda v: is_int(v) and v >= 0, "must be an integer >= 0"),
    ("seed", is_int, "must be an integer"),
    ("checkpoint.frequency", count, "must be an integer >= 1"),
    ("knn_eval.k", count, "must be an integer >= 1"),
    ("backbone.kwargs.width", count, "must be an integer >= 1"),
    ("backbone.kwargs.first_stage_width", count, "must be an integer >= 1 (unset: backbone.kwargs.width)"),
    ("performance.compile", lambda v: isinstance(v, bool), "use true or false"),
    ("performance.disable_channel_last", lambda v: isinstance(v, bool), "use true or false"),
    ("performance.loss_fp32", lambda v: isinstance(v, bool), "use true or false (unset: as the method ships)"),
    ("performance.finite_check_every", lambda v: v == AUTO or count(v), "use auto or an integer >= 1 (steps)"),
)
PRECISIONS = ("auto", "64", "32", "16", "bf16", "64-true", "32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true")
SCHEDULERS = ("warmup_cosine", "step", "none")  # what solo-learn's configure_optimizers builds


def check_training_keys(cfg: DictConfig, optimizers: tuple[str, ...]) -> None:
    """Batch size, epochs, optimizer, scheduler (and a constant lr's ramps, train/lr_ramp_callback.py: its
    warm-up over the first training minutes, ``scheduler.warmup_minutes``; its tail, a linear decay
    to zero over the last epochs, ``scheduler.tail_epochs``, or the budget's last minutes,
    ``scheduler.tail_minutes``), precision and :data:`TRAINING_RULES`."""
    batch_size = select(cfg, "optimizer.batch_size")
    if not is_int(batch_size) or batch_size < 2:
        raise ConfigError(f"optimizer.batch_size={batch_size!r}: must be an integer >= 2 (batch statistics)")
    max_epochs = select(cfg, "max_epochs")
    if not is_int(max_epochs) or max_epochs < 1:
        raise ConfigError(f"max_epochs={max_epochs!r}: must be an integer >= 1")
    name = select(cfg, "optimizer.name")
    if name not in optimizers:
        raise ConfigError(f"optimizer.name={name!r}: choose one of {sorted(optimizers)}")
    scheduler = select(cfg, "scheduler.name", "none")
    if scheduler not in SCHEDULERS:
        raise ConfigError(f"scheduler.name={scheduler!r}: choose one of {SCHEDULERS}")
    if scheduler == "step":
        steps = select(cfg, "scheduler.lr_decay_steps")
        if steps is None or len(steps) == 0 or not all(count(s) for s in steps):
            raise ConfigError(f"scheduler.lr_decay_steps={steps!r}: the step scheduler needs epochs, e.g. [60, 80]")
    tail = select(cfg, "scheduler.tail_epochs", 0)
    if not is_int(tail) or not 0 <= tail <= max_epochs:
        raise ConfigError(f"scheduler.tail_epochs={tail!r}: must be an integer in [0, max_epochs={max_epochs}]")
    check_tail_minutes(cfg, tail)
    check_cycle_minutes(cfg)
    check_warmup_minutes(cfg)
    for key in ("warmup_minutes", "tail_epochs", "tail_minutes", "cycle_minutes"):
        if select(cfg, f"scheduler.{key}", 0) and scheduler != "none":
            raise ConfigError(
                f"scheduler.{key}={select(cfg, f'scheduler.{key}')} ramps a constant lr, but scheduler.name="
                f"{scheduler!r} has its own schedule: set scheduler.name=none, or scheduler.{key}=0"
            )
    precision = str(select(cfg, "precision", "32"))
    if precision not in PRECISIONS:
        raise ConfigError(f"precision={precision!r}: choose one of {PRECISIONS}")
    apply_rules(cfg, TRAINING_RULES)


def check_tail_minutes(cfg: DictConfig, tail_epochs: int) -> None:
    """``scheduler.tail_minutes``: the last minutes of the time budget
    (``epoch_knn.stop_after_minutes``, whose clock it reads) over which a constant lr falls to zero."""
    minutes = select(cfg, "scheduler.tail_minutes", 0)
    if minutes in (0, None):
        return
    budget = select(cfg, "epoch_knn.stop_after_minutes") if select(cfg, "epoch_knn.enabled", False) else None
    if not is_number(minutes) or minutes < 0:
        raise ConfigError(f"scheduler.tail_minutes={minutes!r}: give training minutes >= 0 (e.g. 20), or 0 for none")
    if budget is None:
        raise ConfigError(
            f"scheduler.tail_minutes={minutes} ends the lr at a time budget, and this run has none: set "
            "epoch_knn.enabled=true and epoch_knn.stop_after_minutes (e.g. 60), or use scheduler.tail_epochs"
        )
    if is_number(budget) and budget > 0 and minutes > budget:
        raise ConfigError(
            f"scheduler.tail_minutes={minutes} is longer than the budget, epoch_knn.stop_after_minutes={budget}: "
            "give at most the budget"
        )
    if tail_epochs:
        raise ConfigError(
            f"scheduler.tail_minutes={minutes} and scheduler.tail_epochs={tail_epochs}: choose one tail, the other 0"
        )


def check_cycle_minutes(cfg: DictConfig) -> None:
    """``scheduler.cycle_minutes``: the budget cut into cycles of this length, each ending in the
    tail (``scheduler.tail_minutes``), so each cycle's end is a finished model."""
    minutes = select(cfg, "scheduler.cycle_minutes", 0)
    if minutes in (0, None):
        return
    if not is_number(minutes) or minutes < 0:
        raise ConfigError(f"scheduler.cycle_minutes={minutes!r}: give training minutes >= 0 (e.g. 20), or 0 for none")
    tail = select(cfg, "scheduler.tail_minutes", 0) or 0
    if not tail or tail > minutes:
        raise ConfigError(
            f"scheduler.cycle_minutes={minutes} repeats the tail in every cycle: give scheduler.tail_minutes "
            f"in (0, {minutes:g}] (e.g. scheduler.tail_minutes={minutes:g}, the lr falling over the whole cycle)"
        )
    budget = select(cfg, "epoch_knn.stop_after_minutes")  # check_tail_minutes made sure there is one
    cycles = budget / minutes if is_number(budget) else 1
    if abs(cycles - round(cycles)) > 1e-6 or round(cycles) < 1:
        raise ConfigError(
            f"scheduler.cycle_minutes={minutes} does not divide the budget, epoch_knn.stop_after_minutes={budget}, "
            f"so the run would stop inside a cycle: give a budget of {max(1, round(cycles)) * minutes:g} minutes "
            "or a cycle that divides it"
        )


def check_warmup_minutes(cfg: DictConfig) -> None:
    """``scheduler.warmup_minutes``: the first training minutes over which a constant lr rises
    from zero; with a time budget, it and the tail must fit in it (in its first cycle, with cycles)."""
    minutes = select(cfg, "scheduler.warmup_minutes", 0)
    if minutes in (0, None):
        return
    if not is_number(minutes) or minutes < 0:
        raise ConfigError(f"scheduler.warmup_minutes={minutes!r}: give training minutes >= 0 (e.g. 2), or 0 for none")
    budget = select(cfg, "epoch_knn.stop_after_minutes") if select(cfg, "epoch_knn.enabled", False) else None
    tail = select(cfg, "scheduler.tail_minutes", 0) or 0
    room = select(cfg, "scheduler.cycle_minutes", 0) or budget  # the warm-up is in the first cycle
    if is_number(room) and room > 0 and minutes + tail > room:
        where = (
            f"the first cycle, scheduler.cycle_minutes={room}"
            if room != budget
            else f"the budget, epoch_knn.stop_after_minutes={budget}"
        )
        raise ConfigError(
            f"scheduler.warmup_minutes={minutes} and scheduler.tail_minutes={tail} overlap in {where}: "
            + (f"give a warm-up of at most {room - tail:g} minutes" if room > tail else "the tail fills it: give a "
               "shorter scheduler.tail_minutes, or no warm-up")
        )  # fmt: skip


PROBE_RULES: tuple[Rule, ...] = (
    ("probe.train_patches", count, "must be an integer >= 1"),
    ("probe.test_patches", count, "must be an integer >= 1"),
    ("probe.epochs", count, "must be an integer >= 1"),
    ("probe.lr", positive, "must be a number > 0"),
    ("probe.batch_size", count, "must be an integer >= 1"),
    ("probe.weight_decay", non_negative, "must be a number >= 0"),
    ("probe.label_smoothing", lambda v: is_number(v) and 0 <= v < 1, "must be in [0, 1)"),
)


def check_probe_cfg(cfg: DictConfig) -> None:
    """The fast probe's keys (when the linear recipe has a ``probe`` block)."""
    if select(cfg, "probe") is None:
        return
    for key, ok, what in PROBE_RULES:
        if select(cfg, key) is None and key != "probe.label_smoothing":
            raise ConfigError(
                f"{key} is missing: set it (see the recipe probe_cifar.yaml: mvssl-recipes show probe_cifar.yaml)"
            )
        require(cfg, key, ok, what)
    device = select(cfg, "probe.device", AUTO)
    if not isinstance(device, str) or not (device in (AUTO, "cpu") or device.startswith("cuda")):
        raise ConfigError(f"probe.device={device!r}: use auto, cpu or cuda")
    cfg.probe.device = device


def check_signals(cfg: DictConfig) -> list[str]:
    """``time_to_accuracy`` and ``effective_rank`` (training-time signals); both need the
    validation set, and are switched off, with a notice, in runs without one."""
    notices = []
    no_val = select(cfg, "data.val_path") is None
    for key in ("time_to_accuracy", "effective_rank"):
        if select(cfg, f"{key}.enabled", False) and no_val:
            cfg[key].enabled = False
            notices.append(f"{key} is off: it measures on the validation set and data.val_path is null")
    if select(cfg, "time_to_accuracy.enabled", False):
        metrics, targets = select(cfg, "time_to_accuracy.metrics"), select(cfg, "time_to_accuracy.targets")
        if not metrics or any(not isinstance(m, str) for m in metrics):
            raise ConfigError(f"time_to_accuracy.metrics={metrics!r}: list metric names, e.g. [val_acc1]")
        if not targets or any(not (is_number(t) and 0 < t <= 100) for t in targets):
            raise ConfigError(f"time_to_accuracy.targets={targets!r}: list accuracies in (0, 100], e.g. [50, 80]")
    if select(cfg, "epoch_knn.enabled", False):
        require(cfg, "epoch_knn.k", lambda v: is_int(v) and v >= 1, "must be an integer >= 1")
        require(cfg, "epoch_knn.temperature", lambda v: is_number(v) and v > 0, "must be a number > 0")
        targets = select(cfg, "epoch_knn.targets")
        if not targets or any(not (is_number(t) and 0 < t <= 100) for t in targets):
            raise ConfigError(f"epoch_knn.targets={targets!r}: list accuracies in (0, 100], e.g. [50, 60, 70]")
        budget = select(cfg, "epoch_knn.stop_after_minutes")
        if budget is not None and not (is_number(budget) and budget > 0):
            raise ConfigError(
                f"epoch_knn.stop_after_minutes={budget!r}: give training minutes > 0 (e.g. 30), or null to train "
                "max_epochs"
            )
        if select(cfg, "data.val_path") is None and not select(cfg, "data.holdout", 0):
            raise ConfigError(
                "epoch_knn.enabled=true with neither data.val_path nor data.holdout: give it a set to measure on "
                "(data.val_path=<test folder> or data.holdout=5000), or set epoch_knn.enabled=false"
            )
    if select(cfg, "effective_rank.enabled", False):
        require(cfg, "effective_rank.num_samples", lambda v: is_int(v) and v >= 2, "must be an integer >= 2")
    return notices
