"""The exception types the CLI turns into a one-line error and a non-zero exit."""


class SpinscopeError(Exception):
    """A user-facing error: its message is printed as one line, without a traceback."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


class UsageError(SpinscopeError):
    """The command line asks for something spinscope will not do (a bad value, options that exclude each
    other): refused before anything runs, with argparse's exit status 2."""

    EXIT_CODE = 2

    def __init__(self, message: str):
        super().__init__(message, exit_code=self.EXIT_CODE)
