-- Variables a minter fills at dispatch (a reset link): declared on the
-- template, so a create can check every other required variable up front.
ALTER TABLE templates ADD COLUMN dispatch_variables text[] NOT NULL DEFAULT '{}';
