-- Issue #42, third pass: every claim and every record moves an intent to a
-- new tuple (its state and due time are indexed), so each index on intents
-- whose predicate the new row meets gets an entry per move. Four indexes
-- lead with what a 0034 listing index leads with; each pair is one index
-- now, the listing one, whose readers are listed here and held to a page by
-- the plan guard (tests/integration/plan_guard/params.py, CASES).
--
-- (tenant_id, recipient_ref, channel): the frequency caps' recent_sends
-- and a bulk cancel by recipient read a recipient's few intents through
-- intents_listing_recipient, the channel checked on the rows.
DROP INDEX intents_recipient;
-- (tenant_id, event_class, id) and (tenant_id, correlation_id, id): a bulk
-- cancel by class or correlation id walks its batches in (created_at, id)
-- order now (cancel_candidates), through the listing indexes; a cancel of
-- a job keeps its id order on intents_job (cancel_candidates_in_job).
DROP INDEX intents_event_class;
DROP INDEX intents_correlation;
-- (tenant_id, created_at, id) of the open states: the console's oldest
-- open intents (console_oldest) are the oldest of each open state, each
-- read from the front of intents_listing_state.
DROP INDEX intents_open_oldest;
