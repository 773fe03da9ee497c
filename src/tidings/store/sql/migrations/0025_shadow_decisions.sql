-- The shadow-rollout report reads a tenant's shadow decisions by id
-- (shadow.sql); only those intents are indexed.
CREATE INDEX intents_shadow ON intents (tenant_id, id) WHERE decision_code = 'SHADOW_MODE';
