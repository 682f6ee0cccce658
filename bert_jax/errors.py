"""One exception type for user-facing errors: the CLI prints it as one line, no traceback."""


class BertJaxError(Exception):
    """A problem with user input (file, flag, config value) that the message fully explains."""


class StoppedAndSaved(BertJaxError):
    """Training stopped by SIGTERM after saving its step: unfinished, but its steps are kept and
    a rerun continues from them."""
