"""How the entry points end: one line per error with its exit status, no traceback, and
only the dependency notices known to be harmless silenced (by message)."""

from __future__ import annotations

import functools
import os
import re
import sys
import warnings
from typing import Callable, NoReturn, TypeVar

from mvssl_plugin.errors import NON_FINITE_EXIT_STATUS, ConfigError, DataError, Interrupted, WriteError

T = TypeVar("T")

#: (message pattern, why it is harmless): each is printed on every run otherwise
HARMLESS_WARNINGS = (
    (r"Overwriting \w+ in registry", "timm re-registering its own models when solo-learn imports them"),
    (r".*LeafSpec.*", "a torch.utils._pytree deprecation inside Lightning's own code"),
    (r"Importing from timm\.[\w.]+ is deprecated", "solo-learn's import paths into timm"),
    (r"`torch\.cuda\.amp\.custom_fwd\(args\.\.\.\)` is deprecated", "a decorator in solo-learn's whitening module"),
    (r".*does not have many workers which may be a bottleneck.*", "Lightning's advice; data.num_workers is ours"),
    (r"The '\w+_dataloader' does not have many workers", "the same advice, Lightning 2.1's wording"),
)


def quiet_dependency_warnings() -> None:
    """Silences the notices of :data:`HARMLESS_WARNINGS`; every other warning still shows."""
    for pattern, _ in HARMLESS_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)


def fail(message: str, status: int, kind: str = "config error") -> NoReturn:
    """Prints ``mvssl <kind>: <message>`` on stderr and exits with ``status``."""
    print(f"mvssl {kind}: {message}", file=sys.stderr, flush=True)
    sys.exit(status)


def one_line(err: BaseException) -> str:
    """The message of ``err``. A DataLoader worker's exception comes back to the main process
    as ``type(text)`` where the text is the worker's whole traceback: its last line holds the
    original message, which is what is printed."""
    text = str(err)
    if "Original Traceback" not in text:
        return text
    last = text.rstrip().splitlines()[-1]
    found = re.match(rf"^(?:[\w.]+\.)?{re.escape(type(err).__name__)}: (.*)$", last)
    return found.group(1) if found else last


def report_errors(task: Callable[..., T]) -> Callable[..., T]:
    """Turns a :class:`ConfigError` (exit 2), a non-finite loss (exit 3), a
    :class:`DataError` (exit 4), a :class:`WriteError` (exit 5) or an :class:`Interrupted`
    run (exit 130 / 143) into one line, instead of a traceback. Checkpoints already written
    stay as they are."""

    @functools.wraps(task)
    def wrapped(*args, **kwargs):
        try:
            return task(*args, **kwargs)
        except ConfigError as err:
            fail(one_line(err), ConfigError.exit_status)
        except FloatingPointError as err:
            fail(one_line(err), NON_FINITE_EXIT_STATUS, kind="training stopped")
        except DataError as err:
            fail(one_line(err), DataError.exit_status, kind="data error")
        except WriteError as err:
            fail(one_line(err), WriteError.exit_status, kind="write error")
        except Interrupted as err:
            fail(str(err), err.exit_status, kind="interrupted")

    return wrapped


def with_openmp_wait(task: Callable[..., T]) -> Callable[..., T]:
    """Sets OpenMP's wait policy for the run (:func:`~mvssl_plugin.config.hardware.openmp_wait_policy`)
    before the task imports torch, unless the environment already says one."""

    @functools.wraps(task)
    def wrapped(cfg, *args, **kwargs):
        # local: omegaconf (~0.2 s) loads for a Hydra run only; every entry point imports this module
        from mvssl_plugin.config.hardware import openmp_wait_policy

        policy = openmp_wait_policy(cfg)
        if policy and "OMP_WAIT_POLICY" not in os.environ and "torch" not in sys.modules:
            os.environ["OMP_WAIT_POLICY"] = policy
        return task(cfg, *args, **kwargs)

    return wrapped


def with_process_group_closed(task: Callable[..., T]) -> Callable[..., T]:
    """Closes the process group a DDP run opened, once the task has returned: the recipes train
    with DDP on a GPU even on one, and torch's NCCL then warns at exit that
    ``destroy_process_group()`` was not called (every run of the first GPU smoke did); under
    Hydra's multirun the next run would find the old group."""

    @functools.wraps(task)
    def wrapped(cfg, *args, **kwargs):
        result = task(cfg, *args, **kwargs)
        close_process_group()
        return result

    return wrapped


def close_process_group() -> None:
    """``torch.distributed.destroy_process_group()`` if a group is open (torch not imported: nothing to close)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def run_hydra(task: Callable, kind: str) -> None:
    """Runs ``task`` as a Hydra app whose recipes live under the recipe roots (./scripts/<kind>, the package's)."""
    # local: Hydra and omegaconf (~0.4 s) load for a Hydra run only; every entry point imports this module
    import hydra

    from mvssl_plugin.cli.config_name import with_recipe_path

    quiet_dependency_warnings()
    if any(arg in ("--help", "-h") for arg in sys.argv[1:]):
        from mvssl_plugin.cli.recipes import recipe_listing  # local: as above (recipes loads omegaconf)

        print(f"usage: {os.path.basename(sys.argv[0])} --config-name RECIPE [key=value ...]\n{recipe_listing()}\n")
    try:
        sys.argv = [sys.argv[0]] + with_recipe_path(sys.argv[1:], kind)
    except ConfigError as err:
        fail(str(err), ConfigError.exit_status)
    hydra.main(version_base="1.2", config_path=None)(report_errors(with_openmp_wait(with_process_group_closed(task))))()
