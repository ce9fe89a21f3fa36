"""The one exception type users see for bad input."""


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key and the fix.

    The entry points print it without a traceback and exit with status 2, before any
    model, data loader or output folder is created.
    """
