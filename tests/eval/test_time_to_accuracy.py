"""The "stays at or above" reading of a noisy curve (eval/time_to_accuracy.py)."""

from __future__ import annotations

import pytest

from mvssl_plugin.eval.time_to_accuracy import first_at_or_above, stays_at_or_above


@pytest.mark.parametrize(
    ("values", "target", "stays", "first"),
    [
        ([40, 51, 49, 52, 53], 50, 3, 1),  # a lucky epoch, then a dip: the reading waits for the dip to end
        ([40, 45, 50, 55], 50, 2, 2),  # equal to the target counts as reaching it
        ([55, 56, 57], 50, 0, 0),
        ([40, 51, 52, 49], 50, None, 1),  # ends below: not reached, however often it passed
        ([], 50, None, None),
        ([60, 40, 60, 40, 60], 50, 4, 0),
    ],
)
def test_a_curve_reaches_a_target_from_the_epoch_after_which_it_stays_there(values, target, stays, first):
    assert stays_at_or_above(values, target) == stays
    assert first_at_or_above(values, target) == first
