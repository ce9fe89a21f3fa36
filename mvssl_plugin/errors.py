"""The one exception type users see for bad input."""


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key and the fix.

    The entry points print it without a traceback and exit with status 2, before any
    model, data loader or output folder is created.
    """


class DataError(RuntimeError):
    """A data file that cannot be used (e.g. a corrupt image found while training); the
    message names the file and the fix. The entry points print it and exit with status 4;
    checkpoints already written are kept."""
