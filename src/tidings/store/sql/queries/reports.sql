-- name: report_by_id
SELECT * FROM reports WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND revision = %(revision)s;

-- name: insert_report
INSERT INTO reports (tenant_id, id, revision, filename, content_type, location, size_bytes,
                     created_at)
VALUES (%(tenant_id)s, %(id)s, %(revision)s, %(filename)s, %(content_type)s, %(location)s,
        %(size_bytes)s, %(now)s)
ON CONFLICT (tenant_id, id, revision) DO NOTHING;
