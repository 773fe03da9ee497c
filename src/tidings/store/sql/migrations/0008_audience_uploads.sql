-- Uploaded audiences: a large audience streamed in before the job that
-- uses it (POST /v1/audiences), so no process ever holds it whole. Members
-- carry destinations only encrypted, named by their keyed hash, exactly as
-- `destinations` does; a job copies them into its frozen audience with one
-- INSERT ... SELECT and consumes the upload. Unused or not, an upload is
-- deleted with its members once it expires.

CREATE TABLE audience_uploads (
    tenant_id    text        NOT NULL REFERENCES tenants (tenant_id),
    id           uuid        NOT NULL,
    size         integer     NOT NULL,
    version      text        NOT NULL,
    created_by   text        NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    -- Set when a job froze it; an upload serves one job.
    job_id       uuid,
    consumed_at  timestamptz,
    PRIMARY KEY (tenant_id, id)
);

CREATE INDEX audience_uploads_expiry ON audience_uploads (expires_at);

-- seq is the member's position in the upload (its line), so an error found
-- after the rows are in (a ref seen twice) can still name the line. Refs
-- are not unique here for that reason; the job's frozen audience is.
CREATE TABLE audience_upload_members (
    tenant_id         text    NOT NULL,
    upload_id         uuid    NOT NULL,
    seq               integer NOT NULL,
    recipient_ref     text    NOT NULL,
    phone_hash        text,
    phone_ciphertext  bytea,
    phone_country     text,
    email_hash        text,
    email_ciphertext  bytea,
    timezone          text,
    locale            text,
    preferences       text[]  NOT NULL DEFAULT '{}',
    variables         jsonb   NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (tenant_id, upload_id, seq),
    FOREIGN KEY (tenant_id, upload_id) REFERENCES audience_uploads (tenant_id, id)
        ON DELETE CASCADE,
    CHECK ((phone_hash IS NULL) = (phone_ciphertext IS NULL)),
    CHECK ((email_hash IS NULL) = (email_ciphertext IS NULL))
);
