"""Progress off a terminal (issue 24): whole lines, spaced by percent and by time, instead of
tqdm's carriage-return redraws (a kNN log was once one line of thousands of updates)."""

from __future__ import annotations

import io

from mvssl_plugin.progress import MAX_SECONDS, MIN_SECONDS, LineProgress, progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def lines_at(total, seconds_per_step: float, steps: int) -> list:
    clock = Clock()
    lines = LineProgress("epoch 0 train", total, clock=clock)
    said = []
    for done in range(1, steps + 1):
        clock.now += seconds_per_step
        line = lines.update(done)
        if line is not None:
            said.append(line)
    return said


def test_a_line_every_ten_percent_when_steps_are_slow_enough():
    said = lines_at(100, MIN_SECONDS, 100)
    assert (
        len(said) == 10
        and said[0] == "epoch 0 train 10/100 (10%), 50 s"
        and said[-1].startswith("epoch 0 train 100/100")
    )


def test_fast_loops_say_only_their_end_and_slow_ones_at_least_every_minute():
    assert lines_at(1000, 0.001, 1000) == ["epoch 0 train 1000/1000 (100%), 1 s"]
    slow = lines_at(10_000, MAX_SECONDS / 4, 20)  # 20 steps, far below 10%: a line per minute
    assert [line.split(",")[0].removeprefix("epoch 0 train ") for line in slow] == ["4/10000 (0%)", "8/10000 (0%)",
                                                                           "12/10000 (0%)", "16/10000 (0%)",
                                                                           "20/10000 (0%)"]  # fmt: skip


def test_an_unknown_total_still_gets_timed_lines():
    assert lines_at(None, MAX_SECONDS, 2) == ["epoch 0 train 1, 60 s", "epoch 0 train 2, 120 s"]


def test_progress_to_a_file_writes_lines_and_every_item():
    stream = io.StringIO()
    assert list(progress(range(7), "val features", stream=stream)) == list(range(7))
    assert "\r" not in stream.getvalue() and stream.getvalue() == "val features 7/7 (100%), 0 s\n"
    quiet = io.StringIO()
    assert list(progress(range(3), None, stream=quiet)) == [0, 1, 2] and quiet.getvalue() == ""
