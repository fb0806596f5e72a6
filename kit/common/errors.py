"""The kit's exceptions: one root, subclasses that say what was wrong and what to do.

Imported on both sides (host and kernel), so it stays Python 3.6 clean.
"""

#: what the CLI exits with, in one place: 0 every backward cell compatible, 1 regressions found, 2 a usage
#: error (refused before any work), 3 the run or an environment itself broke
EXIT_OK, EXIT_REGRESSIONS, EXIT_USAGE, EXIT_BROKEN = 0, 1, 2, 3
EXIT_MEANINGS = {
    EXIT_OK: "compatible",
    EXIT_REGRESSIONS: "regressions found",
    EXIT_USAGE: "usage error",
    EXIT_BROKEN: "a step broke",
}


class KitError(Exception):
    """Root of every error the kit raises on purpose.

    ``hint`` tells the user what to do about it; ``exit_code`` is what the CLI
    exits with (2 usage error, 3 the run or an environment itself broke).
    """

    exit_code = EXIT_BROKEN

    def __init__(self, message, hint=None):
        super(KitError, self).__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self):
        if self.hint:
            return "%s\n  hint: %s" % (self.message, self.hint)
        return self.message


class UsageError(KitError):
    """Bad input from the user: nothing was started."""

    exit_code = EXIT_USAGE


class UnknownReleaseError(UsageError):
    """A release name that is neither in the release table nor a custom environment."""


class InterpreterNotFoundError(UsageError):
    """No Python interpreter of the version a release needs could be found."""


class MissingSystemLibraryError(UsageError):
    """A shared library MXNet needs (libgomp, libquadmath) is not installed."""


class EnvNotFoundError(UsageError):
    """An environment that was asked for has not been created."""


class StoreError(KitError):
    """A store could not be read or written (unreachable, refused, tampered)."""


class EnvBuildError(KitError):
    """Creating or verifying an environment failed."""
