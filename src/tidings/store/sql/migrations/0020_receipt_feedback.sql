-- Receipts feed suppression: an unsubscribe, a spam complaint or a hard
-- bounce reported by a provider blocks the next send to that destination.
-- The evidence is kept with the block (which provider, which attempt, the
-- provider's own status word), so an operator can say why a recipient
-- stopped receiving. Rows written by hand or by a send-time rejection
-- leave it empty.

ALTER TABLE opt_outs
    ADD COLUMN provider    text,
    ADD COLUMN intent_id   uuid,
    ADD COLUMN attempt_n   integer,
    ADD COLUMN raw_status  text CHECK (length(raw_status) <= 200);

ALTER TABLE suppressions
    ADD COLUMN provider    text,
    ADD COLUMN intent_id   uuid,
    ADD COLUMN attempt_n   integer,
    ADD COLUMN raw_status  text CHECK (length(raw_status) <= 200);
