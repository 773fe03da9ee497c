-- What the provider answered when it did not accept a send (seed 002:
-- non-2xx bodies are evidence). Redacted before it is written and bounded
-- (providers/response_body.py); the check keeps any other writer honest.
ALTER TABLE attempts ADD COLUMN response_body text
    CHECK (octet_length(response_body) <= 2048);
