-- Issue #41 item 2: synthetic canaries. Each round sends one synthetic
-- message per provider account and channel to the provider's own test
-- destination (providers/canary_targets.py) and keeps its answer here,
-- apart from every member table: no intent, attempt, suppression or rate
-- counter is written by a canary. `target` names the public test
-- destination ('twilio-magic-valid'), never the address itself; `answer`
-- is the provider's answer, redacted and bounded, never a body.
-- Deployment-wide, like provider_pauses: a Citus reference table.
CREATE TABLE canary_results (
    account  text        NOT NULL,
    channel  text        NOT NULL,
    at       timestamptz NOT NULL,
    target   text        NOT NULL,
    ok       boolean     NOT NULL,
    code     text        NOT NULL,
    answer   text        NOT NULL DEFAULT '' CHECK (length(answer) <= 1000),
    PRIMARY KEY (account, channel, at)
);
CREATE INDEX canary_results_recent ON canary_results (at);
