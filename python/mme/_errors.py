"""The exception classes of mme: one per error class of the C++ library
(framework/include/mme/sdk/error.hpp), each carrying the exit code the ``mme`` CLI returns."""

from __future__ import annotations


class Error(Exception):
    """Every error mme reports. ``exit_code`` is the CLI's exit status for it, ``message`` the
    text of its ``mme: error: ...`` line."""

    exit_code: int = 1

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def __reduce__(self) -> tuple[Any, ...]:
        # Picklable with its exit code (a multiprocessing worker hands errors back).
        return (type(self), (self.message, self.exit_code))


class InternalError(Error):
    """A bug or an exhausted resource (exit code 1)."""

    exit_code = 1


class UsageError(Error):
    """A bad argument: an unknown keyword or flag, a bad value, contradicting options (exit code 2)."""

    exit_code = 2


class ConfigError(Error):
    """The model or config cannot be read or makes no sense (exit code 3)."""

    exit_code = 3


class LayoutError(Error):
    """The parallel layout is invalid for this model (exit code 4)."""

    exit_code = 4


class PluginError(Error):
    """A plugin problem that stops the command: no adapter, no layer model (exit code 5)."""

    exit_code = 5


class NotFoundError(Error):
    """A model or file not found, a download that failed (exit code 6)."""

    exit_code = 6


class OutOfMemoryError(Error):
    """Raised by :func:`mme.preflight`: the estimate does not fit the GPU. Not an error of the
    CLI (``mme estimate`` reports a verdict, exit code 0); ``exit_code`` is 1 for a script that
    exits with it. ``result`` is the :class:`mme.Estimate`."""

    exit_code = 1

    def __init__(self, message: str, exit_code: int | None = None, result: Any = None) -> None:
        super().__init__(message, exit_code)
        self.result = result

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.exit_code, self.result))


class MmeWarning(UserWarning):
    """What mme logs at the warning level (the CLI's ``mme: warning: ...`` lines on stderr)."""


ERROR_CLASSES: dict[str, type[Error]] = {
    "UsageError": UsageError,
    "ConfigError": ConfigError,
    "LayoutError": LayoutError,
    "PluginError": PluginError,
    "NotFoundError": NotFoundError,
    "InternalError": InternalError,
    "Error": Error,
}

_BY_CODE: dict[int, type[Error]] = {1: InternalError, 2: UsageError, 3: ConfigError, 4: LayoutError,
                                    5: PluginError, 6: NotFoundError}


def error_from_response(error: dict[str, Any], exit_code: int) -> Error:
    """The exception of an error document of the C entry point."""
    cls = ERROR_CLASSES.get(error.get("type", ""), _BY_CODE.get(exit_code, Error))
    return cls(error.get("message", ""), exit_code)
