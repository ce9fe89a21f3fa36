"""How the entry points report errors (cli/exits.py)."""

from __future__ import annotations

import pytest

from mvssl_plugin.errors import DataError

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_worker_traceback_is_printed_as_its_original_line(capsys):
    from mvssl_plugin.cli.exits import report_errors

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


def test_the_process_group_a_run_opened_is_closed_when_it_returns(tmp_path):
    """A DDP run leaves torch.distributed's group open; on a GPU NCCL then warns at exit, and a
    multirun's next run would find it. Here a one-process gloo group stands in for it."""
    import torch.distributed as dist

    from mvssl_plugin.cli.exits import with_process_group_closed

    def ddp_run(cfg):
        dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
        assert dist.is_initialized()
        return "trained"

    try:
        assert with_process_group_closed(ddp_run)(None) == "trained"
        assert not dist.is_initialized()
        assert with_process_group_closed(lambda cfg: 3)(None) == 3  # no group: nothing to close
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
