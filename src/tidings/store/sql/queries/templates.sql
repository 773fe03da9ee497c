-- name: next_template_revision
-- Revisions count per template name; the advisory lock serializes two
-- publishers of the same name so each gets its own number.
SELECT pg_advisory_xact_lock(hashtextextended(%(tenant_id)s || '/' || %(name)s, 0)),
       coalesce(max(revision), 0) + 1 AS revision
FROM templates WHERE tenant_id = %(tenant_id)s AND name = %(name)s;

-- name: insert_template
INSERT INTO templates (tenant_id, name, revision, channel, locale, subject, body, html_body,
                       required_variables, attachment_policy, provider_template_ids,
                       content_hash, created_at, created_by, dispatch_variables)
VALUES (%(tenant_id)s, %(name)s, %(revision)s, %(channel)s, %(locale)s, %(subject)s, %(body)s,
        %(html_body)s, %(required_variables)s, %(attachment_policy)s,
        %(provider_template_ids)s, %(content_hash)s, %(now)s, %(actor)s,
        %(dispatch_variables)s);

-- name: latest_same_content
SELECT * FROM templates
WHERE tenant_id = %(tenant_id)s AND name = %(name)s AND channel = %(channel)s
  AND locale = %(locale)s
ORDER BY revision DESC LIMIT 1;

-- name: template_candidates
-- The newest revision per locale of a template for one channel.
SELECT DISTINCT ON (locale) * FROM templates
WHERE tenant_id = %(tenant_id)s AND name = %(name)s AND channel = %(channel)s
ORDER BY locale, revision DESC;

-- name: template_revision
SELECT * FROM templates
WHERE tenant_id = %(tenant_id)s AND name = %(name)s AND revision = %(revision)s;

-- name: templates_list
SELECT DISTINCT ON (name, channel, locale) * FROM templates
WHERE tenant_id = %(tenant_id)s
ORDER BY name, channel, locale, revision DESC;

-- name: template_history
-- Every revision of one template name, newest first: `tidings templates show`.
SELECT * FROM templates
WHERE tenant_id = %(tenant_id)s AND name = %(name)s
ORDER BY revision DESC;
