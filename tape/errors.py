"""Exceptions with PaddlePaddle's names; messages name the op, the slot, expected and received."""


class TapeError(Exception):
    """Base class of every error Tape raises on purpose."""


class InvalidArgumentError(TapeError, ValueError):
    """An input, a shape or an attribute that contradicts the op's declaration."""


class NotFoundError(TapeError, KeyError):
    """An op type, kernel, slot or variable that does not exist."""

    def __str__(self):  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class PreconditionNotMetError(TapeError, RuntimeError):
    """A call made in the wrong state (a spent tape, a stale Variable)."""


class PermissionDeniedError(TapeError, RuntimeError):
    """A check that forbids what an op did (reserved for the unused-input check)."""
