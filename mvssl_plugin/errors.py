"""The exceptions users see for bad input, and the exit status each one ends a run with."""


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key and the fix.

    The entry points print it without a traceback and exit with status 2, before any
    model, data loader or output folder is created.
    """

    exit_status = 2


class DataError(RuntimeError):
    """A data file that cannot be used (e.g. a corrupt image); the message names the file
    and the fix. The entry points print it and exit with status 4; checkpoints already
    written are kept."""

    exit_status = 4


#: a non-finite loss (raised as FloatingPointError by the methods)
NON_FINITE_EXIT_STATUS = 3
