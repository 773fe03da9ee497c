"""Issue #39, finding 9: API keys are stored as keyed hashes, as documented.

The docs said keyed hashes; the table held a plain SHA-256 of each key, so
anyone who could read the table alone could test a candidate key. Now the stored hash is an HMAC
keyed by a key derived from TIDINGS_SECRET_KEY: without the secret, a row
confirms no key. Keys stored before keep working and are rehashed the
first time they are used.
"""

from __future__ import annotations

import hashlib

import psycopg
from fastapi.testclient import TestClient

from tests.security.key_support import auth, client, is_problem, new_key
from tidings import ManualClock, Tidings


def stored_hash(db_url: str, key: str) -> str:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT key_hash FROM api_keys WHERE key_id = %s", (key.split("_")[1],)
        ).fetchone()
    assert row is not None
    return str(row[0])


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_stored_key_hash_is_keyed_by_the_secret(
    tidings: Tidings, db_url: str, clock: ManualClock
) -> None:
    key = new_key(tidings, "acme", ["read"])
    assert stored_hash(db_url, key).startswith("hmac-sha256:")
    assert sha256(key) not in stored_hash(db_url, key)
    assert client(tidings).get("/v1/events", headers=auth(key)).status_code == 200
    # The same table under another secret confirms nothing.
    other = Tidings(db_url, clock=clock, secret_key="another-secret-0123456789abcdef")
    try:
        is_problem(client(other).get("/v1/events", headers=auth(key)), 401, "UNAUTHENTICATED")
    finally:
        other.close()


def test_a_key_stored_as_plain_sha256_works_once_and_is_rehashed(
    tidings: Tidings, db_url: str
) -> None:
    key = new_key(tidings, "acme", ["read"])
    with psycopg.connect(db_url) as conn:  # as a key made before the change was stored
        conn.execute(
            "UPDATE api_keys SET key_hash = %s WHERE key_id = %s", (sha256(key), key.split("_")[1])
        )
    http: TestClient = client(tidings)
    assert http.get("/v1/events", headers=auth(key)).status_code == 200
    rehashed = stored_hash(db_url, key)
    assert rehashed.startswith("hmac-sha256:") and sha256(key) not in rehashed
    assert http.get("/v1/events", headers=auth(key)).status_code == 200
    assert stored_hash(db_url, key) == rehashed
