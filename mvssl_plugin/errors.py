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


class WriteError(RuntimeError):
    """A file that could not be written (disk full, file-size limit, permissions); the
    message names the path and the errno. The entry points print it and exit with status 5;
    the files written before it (the previous checkpoint included) are left intact."""

    exit_status = 5


class Interrupted(RuntimeError):
    """SIGINT or SIGTERM during training, after a resumable checkpoint was written; the
    entry points print the message and exit with 128 + the signal number (130, 143)."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.exit_status = 128 + signum


#: a non-finite loss (raised as FloatingPointError by the methods)
NON_FINITE_EXIT_STATUS = 3
