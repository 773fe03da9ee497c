-- Issue #40, item 4. GET /v1/intents lists a tenant's intents newest first,
-- by (created_at, id), with an optional filter. Each filter a caller leads
-- with has an index that ends in the listing's order, so a page reads about
-- a page of index entries whatever the tenant's size (docs/finding.md). The
-- idempotency key has its unique index already; the other filters of a
-- request are checked on the rows the leading index walks.
CREATE INDEX intents_listing ON intents (tenant_id, created_at, id);
CREATE INDEX intents_listing_recipient ON intents (tenant_id, recipient_ref, created_at, id);
CREATE INDEX intents_listing_event_class ON intents (tenant_id, event_class, created_at, id);
-- Only the unfinished states: most intents are finished, and an index led
-- by every state was taken for a bulk cancel's count of finished intents,
-- a read of the tenant's whole history (tests/security/test_bulk_cancel_cost.py).
-- A finished state is listed through intents_listing, filtered.
CREATE INDEX intents_listing_state ON intents (tenant_id, state, created_at, id)
    WHERE state IN ('pending', 'sending', 'accepted', 'resend_due', 'reconciling');
CREATE INDEX intents_listing_correlation ON intents (tenant_id, correlation_id, created_at, id)
    WHERE correlation_id IS NOT NULL;
