"""The project's own errors: a module of its own, below every other, so that any module can raise them."""


# Exit statuses every command of the project shares: the implementations' and `python -m compare`'s
# (compare/names.py adds its own above these).
EXIT_FAILED = 1  # the run failed (its record says why)
EXIT_USAGE = 2  # bad input: one line, nothing launched


class UsageError(Exception):
    """Bad input: reported as one line and exit status 2, never as a traceback."""
