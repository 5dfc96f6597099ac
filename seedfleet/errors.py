"""The one kind of error the `seedfleet` command answers with a line, not a traceback."""

from __future__ import annotations


class UsageError(ValueError):
    """A mistake in what the user asked for (an unknown env id, continuous actions, a flag
    value out of range): `seedfleet` prints it on one line and exits with code 2."""
