"""The constant lr's ramps (mvssl_plugin/lr_ramps.py): a straight line up from zero over the
warm-up, constant, then a straight line down to zero over the tail."""

from __future__ import annotations

import pytest

from mvssl_plugin.lr_ramps import ramp_phrases, tail_factor, warmup_factor


def test_the_lr_is_constant_until_the_tail_then_falls_by_one_tail_step_each_step():
    factors = [tail_factor(step, 10, 4) for step in range(10)]
    assert factors == [1.0] * 6 + [1.0, 0.75, 0.5, 0.25]
    assert tail_factor(10, 10, 4) == 0.0 and tail_factor(12, 10, 4) == 0.0  # past the end: nothing


def test_no_tail_is_a_constant_lr_and_a_tail_of_the_whole_run_is_linear_from_the_first_step():
    assert {tail_factor(step, 10, 0) for step in range(12)} == {1.0}
    assert [tail_factor(step, 4, 4) for step in range(4)] == [1.0, 0.75, 0.5, 0.25]


def test_counted_in_training_seconds_the_line_is_the_same():
    # a 60-minute budget with a 20-minute tail: full lr to minute 40, half at 50, none at 60 and past
    minutes = [0.0, 39.9, 40.0, 50.0, 59.0, 60.0, 61.3]
    factors = [tail_factor(60.0 * m, 3600.0, 1200.0) for m in minutes]
    assert factors == pytest.approx([1.0, 1.0, 1.0, 0.5, 0.05, 0.0, 0.0])


@pytest.mark.parametrize("tail, total", [(-1, 10), (11, 10), (0, 0), (0.5, 0.25)])
def test_a_tail_outside_the_run_is_an_error(tail, total):
    with pytest.raises(ValueError, match="must be in"):
        tail_factor(0, total, tail)


def test_the_warm_up_rises_in_a_straight_line_from_zero_to_the_full_lr_and_stays_there():
    # a 2-minute warm-up counted in training seconds: nothing at the start, half at one minute
    seconds = [0.0, 30.0, 60.0, 119.0, 120.0, 3600.0]
    assert [warmup_factor(t, 120.0) for t in seconds] == pytest.approx([0.0, 0.25, 0.5, 119 / 120, 1.0, 1.0])
    assert {warmup_factor(t, 0.0) for t in seconds} == {1.0}  # no warm-up: the constant lr throughout


@pytest.mark.parametrize("now, warmup", [(0.0, -1.0), (-1.0, 60.0)])
def test_a_negative_warm_up_or_clock_is_an_error(now, warmup):
    with pytest.raises(ValueError, match="must be >= 0"):
        warmup_factor(now, warmup)


def test_the_ramps_in_words_one_phrase_each():
    """The start block and the model card both take these phrases: a ramp unset says nothing."""
    assert ramp_phrases() == []
    assert ramp_phrases(2.5, 3) == [
        "linear from zero over the first 2.5 training minutes",
        "linear to zero over the last 3 epochs",
    ]
    assert ramp_phrases(tail_minutes=20) == ["linear to zero over the last 20 training minutes"]
    assert ramp_phrases(tail_minutes=20, cycle_minutes=20) == [
        "linear to zero over the last 20 training minutes of every 20-minute cycle"
    ]
