-- name: note_quarantine
-- One tenant's row or document a shared loop set aside (store/isolation.py).
-- Noted once an hour per subject: a loop that meets it every round must
-- not fill the table.
INSERT INTO quarantine_log (tenant_id, loop, subject, code, error, at)
SELECT %(tenant_id)s, %(loop)s, %(subject)s, %(code)s, %(error)s, %(now)s
WHERE NOT EXISTS (
    SELECT 1 FROM quarantine_log
    WHERE at > %(now)s - interval '1 hour' AND tenant_id = %(tenant_id)s
      AND loop = %(loop)s AND subject = %(subject)s AND code = %(code)s);
