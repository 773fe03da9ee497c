"""The exception tree. Errors that reach an API client carry a stable code.

TidingsError
├── InvalidInput            bad request data; nothing was created (422)
│   ├── InvalidLine         ... at one line of a streamed body
│   │   └── InvalidLines    ... at several (a CSV upload lists each bad row)
│   └── DateOutOfRange      a time outside 1970-01-01..9000-01-01 UTC
├── NotFound                no such row for this tenant (404)
├── Conflict                the request clashes with what exists (409)
│   ├── IdempotencyConflict the key was used with a different body
│   ├── AlreadyTerminal     the intent is finished; it cannot change
│   ├── AudienceUploadUsed  another job already froze this uploaded audience
│   └── AlreadyLifted       the suppression was lifted already
├── RequestLimited          a user-triggered class's request bound is full (429)
└── StaleTransition         someone else moved the intent first
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime


class TidingsError(Exception):
    code = "TIDINGS_ERROR"


class InvalidInput(TidingsError, ValueError):
    code = "INVALID_INPUT"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class MissingVariables(InvalidInput):
    """A create that lacks required variables of its template revision:
    refused with nothing created, instead of failing later at render."""

    code = "MISSING_VARIABLES"

    def __init__(self, template: str, missing: tuple[str, ...]) -> None:
        super().__init__(
            "variables", f"template {template} needs {', '.join(missing)}, which were not given"
        )
        self.missing = missing


class PolicyMissing(InvalidInput):
    """A job asked of a tenant that has published no policy: its channels
    cannot be resolved, so nothing is created."""

    code = "POLICY_MISSING"

    def __init__(self, message: str) -> None:
        super().__init__("policy", message)


class InvalidLine(InvalidInput):
    """Invalid input at one line (1-based) of a streamed body: a client
    fixing a million-line upload needs the line, not just the field."""

    def __init__(self, line: int, field: str, message: str) -> None:
        super().__init__(field, f"line {line}: {message}")
        self.line = line


class InvalidLines(InvalidLine):
    """Several invalid lines of one streamed body, in order, so a client
    fixes a spreadsheet in one pass; its own `line` and `field` are the
    first's, and `errors` holds them all."""

    def __init__(self, errors: Sequence[InvalidLine]) -> None:
        first, more = errors[0], len(errors) - 1
        InvalidInput.__init__(
            self, first.field, first.message + (f" (and {more} more)" if more else "")
        )
        self.line = first.line
        self.errors = tuple(errors)


class ValueOutOfRange(InvalidInput):
    """A number past its stated limit (a policy's, domain/policy_bounds.py):
    well-formed, but one tenant's value would stop arithmetic every tenant
    shares. `field` is the value's path in the document."""

    code = "VALUE_OUT_OF_RANGE"


class DateOutOfRange(InvalidInput):
    """A time the engine refuses to store (domain/moments.py): outside the
    range every reader, Python included, can decode."""

    code = "DATE_OUT_OF_RANGE"


class NotFound(TidingsError, LookupError):
    code = "NOT_FOUND"


class Conflict(TidingsError):
    code = "CONFLICT"


class PolicyUnreadable(Conflict, LookupError, ValueError):
    """A stored policy version that cannot be used: missing (a bad restore,
    a hand edit), quarantined, or refused by the parser (written around its
    checks). Only that tenant's work stops on it: loops quarantine what
    names it (store/isolation.py), and its own requests answer 409.
    A LookupError for callers that looked a version up, and a ValueError
    so a claim quarantines the intent like any unreadable row."""

    code = "POLICY_UNREADABLE"

    def __init__(self, tenant_id: str, version: str, why: str) -> None:
        super().__init__(f"policy version {version} of tenant {tenant_id} cannot be used: {why}")
        self.tenant_id = tenant_id
        self.version = version


class IdempotencyConflict(Conflict):
    code = "IDEMPOTENCY_CONFLICT"


class AlreadyTerminal(Conflict):
    code = "ALREADY_TERMINAL"

    def __init__(self, state: str) -> None:
        super().__init__(f"the intent is already {state}")
        self.state = state


class AudienceUploadUsed(Conflict):
    code = "AUDIENCE_UPLOAD_USED"


class RequestLimited(TidingsError):
    """A create of a user-triggered event class over one of its policy's
    request bounds (domain/request_limits.py): refused at the edge, nothing
    created or sent. `scope` names the bound (`destination` or `prefix`);
    `retry_after` is the whole seconds until its window ends."""

    code = "REQUEST_LIMIT"

    def __init__(self, event_class: str, scope: str, retry_after: int) -> None:
        super().__init__(
            f"too many {event_class} requests to this {scope} in the policy's window; "
            f"nothing was created (retry after {retry_after} s)"
        )
        self.event_class = event_class
        self.scope = scope
        self.retry_after = retry_after


class AlreadyLifted(Conflict):
    """A lift of a suppression that was lifted before: when, and by whom."""

    code = "ALREADY_LIFTED"

    def __init__(self, lifted_at: datetime, lifted_by: str) -> None:
        super().__init__(f"the suppression was already lifted at {lifted_at.isoformat()}")
        self.state = "lifted"
        self.lifted_at = lifted_at
        self.lifted_by = lifted_by


class CohortShrink(Conflict):
    """Shadow mode's live cohort set smaller than it is: refused, since
    growing never re-decides a recipient already live and shrinking would.
    To stop sends in a scope, use the kill switch."""

    code = "COHORT_SHRINK"

    def __init__(self, stored: int, asked: int) -> None:
        super().__init__(
            f"the live cohort is {stored}% and can only grow (asked {asked}%): a smaller"
            " one would shadow recipients already sent to for real; to stop sends in"
            " this scope, turn on the kill switch"
        )
        self.stored = stored
        self.asked = asked


class StaleTransition(TidingsError):
    """Zero rows matched the version-checked update: stop, do not retry blindly."""

    code = "STALE_TRANSITION"
