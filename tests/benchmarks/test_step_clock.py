"""The paired step clock's isolation (benchmarks/step_clock.py): a setting timed with ``--isolate``
runs in a process of its own, which sees nothing an earlier setting left in the parent."""

from __future__ import annotations

import os

import step_clock

import mvssl_plugin.config.hardware as hardware


def test_a_function_in_a_fresh_process_runs_elsewhere_and_returns_its_value():
    assert step_clock.in_fresh_process(os.getpid) != os.getpid()
    assert step_clock.in_fresh_process(max, 3, 7) == 7


def _hardware_doc() -> str:
    return str(hardware.__doc__)


def test_a_fresh_process_does_not_see_what_the_parent_changed_in_a_module(monkeypatch):
    monkeypatch.setattr(hardware, "__doc__", "changed in the parent")
    assert _hardware_doc() == "changed in the parent"
    assert step_clock.in_fresh_process(_hardware_doc) not in ("changed in the parent", "None")
