"""The one exception type the CLI turns into a one-line error and a non-zero exit."""


class SpinscopeError(Exception):
    """A user-facing error: its message is printed as one line, without a traceback."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code
