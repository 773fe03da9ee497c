-- What alert_due reads of each due intent of a lane: what its groups name.
i.tenant_id, i.id, i.channel, i.event_class, i.job_id, i.template_name,
i.template_revision, i.recipient_ref, i.next_due_at, i.created_at,
coalesce(i.report_id, i.variables ->> 'report_id',
         i.variables -> 'report' ->> 'id') AS report_id,
i.purpose, coalesce(i.country, '') AS country
