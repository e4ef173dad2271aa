"""User-facing errors.

Anything a user can cause (bad config, missing model directory, empty dataset, ...) raises
:class:`ShiftkitError` with a one-line message that says what is wrong, where, and how to fix it.
The CLI prints it as ``error: <message>`` and exits with status 2; it never shows a traceback.
"""


class ShiftkitError(Exception):
    """An error caused by user input; its message is shown to the user as one line."""


def require(cond: bool, message: str) -> None:
    """Raise :class:`ShiftkitError` with ``message`` unless ``cond`` holds."""
    if not cond:
        raise ShiftkitError(message)
