"""Domain errors. The API maps them to HTTP status codes in one place (punctual.api.errors)."""

from __future__ import annotations


class PunctualError(Exception):
    """Base class for errors Punctual raises on purpose."""


class NotFound(PunctualError):
    """The resource does not exist, or belongs to another owner (the two are indistinguishable)."""


class InvalidRequest(PunctualError):
    """Bad input that validation of the request body alone could not catch."""

    def __init__(
        self, message: str, field: str | None = None, problems: tuple[InvalidRequest, ...] = ()
    ) -> None:
        """`problems`: every problem found, this one first, where there were several (a batch's jobs)."""
        super().__init__(message)
        self.field = field
        self.problems = problems or (self,)


class Conflict(PunctualError):
    """The request cannot apply to the resource in its current state."""


class PreconditionFailed(PunctualError):
    """A change made on condition that the resource is still at the revision its caller read
    (If-Match), which it no longer is."""


class LostRace(PunctualError):
    """A conditional write found the item changed by someone else (ConditionalCheckFailed)."""


class RetryableStoreError(PunctualError):
    """A throttled or transiently failing call to a store: try again later."""


class UnreadableItem(PunctualError):
    """A stored item this version cannot read (a newer version's status, say): left as it is."""
