"""How the entry points report errors (cli/report.py)."""

from __future__ import annotations

import pytest

from mvssl_plugin.errors import DataError

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_worker_traceback_is_printed_as_its_original_line(capsys):
    from mvssl_plugin.cli.report import report_errors

    def failing_in_a_worker(_):
        text = (
            "Caught DataError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):\n"
            '  File "x.py", line 1, in f\nmvssl_plugin.errors.DataError: cannot read image a.jpg (OSError: x): fix'
        )
        raise DataError(text)

    with pytest.raises(SystemExit) as stop:
        report_errors(failing_in_a_worker)(None)
    assert stop.value.code == 4
    assert capsys.readouterr().err == "mvssl data error: cannot read image a.jpg (OSError: x): fix\n"
