"""The project's own errors: a module of its own, below every other, so that any module can raise them."""


class UsageError(Exception):
    """Bad input: reported as one line and exit status 2, never as a traceback."""
