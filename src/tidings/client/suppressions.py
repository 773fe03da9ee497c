"""The client's review of suppressions: find them with their evidence, and
lift one with a reason that is kept (docs/providers.md, "Reviewing and
lifting suppressions")."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from tidings.client.base import ClientBase
from tidings.domain.errors import AlreadyLifted, InvalidInput, NotFound
from tidings.domain.listing import Cursor, Page, page_size
from tidings.domain.storable import check_text
from tidings.domain.suppressions import Suppression, SuppressionFilter, lift_reason
from tidings.store import contacts, suppression_listing

__all__ = ["Suppression", "SuppressionMethods"]

MOST_ACTOR = 200  # suppression_lifts.lifted_by


class SuppressionMethods(ClientBase):
    def list_suppressions(
        self,
        *,
        reason: str | None = None,
        provider: str | None = None,
        channel: str | None = None,
        since: datetime | None = None,
        lifted: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Suppression]:
        """This tenant's suppressions matching every given filter, newest
        first, each with its evidence and its destination's keyed hash (never
        the destination); `lifted=True` lists the lifted ones instead. Pass
        the page's `next_cursor` back for the next page (None: the last)."""
        which = SuppressionFilter(reason, provider, channel, since, lifted)
        size = page_size(limit)
        after = Cursor.decode(cursor) if cursor else None
        with self.db.transaction() as conn:
            return suppression_listing.list_suppressions(conn, self.tenant, which, after, size)

    def suppression(self, suppression_id: UUID | str) -> Suppression:
        """One suppression of this tenant, active or lifted; NotFound otherwise."""
        wanted = _suppression_id(suppression_id)
        with self.db.transaction() as conn:
            found = suppression_listing.suppression(conn, self.tenant, wanted)
        if found is None:
            raise NotFound(f"no suppression {wanted} in this tenant")
        return found

    def lift_suppression(
        self, suppression_id: UUID | str, *, reason: str, actor: str = "library"
    ) -> Suppression:
        """Lift one suppression: the address may be sent to again. `reason`
        and `actor` are kept with the suppression's evidence. NotFound for
        an id this tenant does not have; AlreadyLifted (409) when it was
        lifted before."""
        wanted = _suppression_id(suppression_id)
        why = lift_reason(reason)
        if len(check_text("actor", actor)) > MOST_ACTOR:
            raise InvalidInput("actor", f"at most {MOST_ACTOR} characters")
        with self.db.transaction() as conn:
            now = self.clock.now()
            if not contacts.lift_suppression(conn, self.tenant, wanted, why, actor, now):
                found = suppression_listing.suppression(conn, self.tenant, wanted)
                if found is None:
                    raise NotFound(f"no suppression {wanted} in this tenant")
                assert found.lifted_at is not None and found.lifted_by is not None
                raise AlreadyLifted(found.lifted_at, found.lifted_by)
            lifted = suppression_listing.suppression(conn, self.tenant, wanted)
        assert lifted is not None
        return lifted


def _suppression_id(value: UUID | str) -> UUID:
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value))
    except ValueError:  # no row could have it: as unknown as any other
        raise NotFound(f"no suppression {value!r} in this tenant") from None
