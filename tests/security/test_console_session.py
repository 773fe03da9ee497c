"""Issue #20 item 8: the console signs in to a session; the key never sits in
a cookie or a URL, sign-in and sign-out cannot be forged from another
site, and cookies are Secure behind an https public URL.

Through the real HTTP app (`create_app`), as a browser would use it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

import psycopg
import pytest
from fastapi.testclient import TestClient
from httpx import Response

from tests.security.key_support import auth, client, new_key
from tidings import ManualClock, Tidings
from tidings.api.settings import ApiSettings
from tidings.platform.settings import Settings

SESSION = "tidings_console_session"
CSRF = "tidings_console_csrf"


def browser(
    t: Tidings, public_base_url: str | None = None, base_url: str = "http://testserver"
) -> TestClient:
    return client(t, ApiSettings(public_base_url=public_base_url), base_url=base_url)


def form_token(http: TestClient) -> str:
    """Open the sign-in page as a browser does: it sets the token cookie."""
    page = http.get("/console/")
    assert page.status_code == 401
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, page.text
    return found.group(1)


def sign_in(
    http: TestClient, key: str, token: str | None = None, headers: Mapping[str, str] = {}
) -> Response:
    data = {"key": key, "csrf": token if token is not None else form_token(http)}
    return http.post("/console/login", data=data, headers=dict(headers), follow_redirects=False)


def session_rows(db_url: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(
            "SELECT tenant_id, key_id, session_hash FROM console_sessions"
        ).fetchall()


def test_the_cookie_holds_a_random_session_id_never_the_key(tidings: Tidings, db_url: str) -> None:
    key = new_key(tidings, "acme", ["read"])
    http = browser(tidings)
    signed = sign_in(http, key)
    assert signed.status_code == 303 and signed.headers["location"] == "/console/"
    cookies = signed.headers.get_list("set-cookie")
    assert not any(key in c or key.split("_", 2)[2] in c for c in cookies)
    session_id = http.cookies[SESSION]
    assert len(session_id) >= 40 and session_id not in key
    # Only a hash of the id is stored, with the key's tenant and id.
    digest = hashlib.sha256(session_id.encode()).hexdigest()
    assert session_rows(db_url) == [("acme", key.split("_")[1], digest)]
    with psycopg.connect(db_url) as conn:
        dump = conn.execute("SELECT row_to_json(s)::text FROM console_sessions s").fetchone()
    assert dump is not None and session_id not in dump[0]
    overview = http.get("/console/")
    assert overview.status_code == 200 and "acme" in overview.text
    assert key not in overview.text


def test_a_key_in_the_query_string_is_never_accepted(tidings: Tidings, db_url: str) -> None:
    key = new_key(tidings, "acme", ["read"])
    http = browser(tidings)
    first = http.get("/console/jobs", params={"key": key, "tenant": "acme"}, follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/console/jobs?tenant=acme"
    assert SESSION not in http.cookies and "tidings_console_key" not in http.cookies
    assert not any(key in c for c in first.headers.get_list("set-cookie"))
    assert http.get("/console/jobs?tenant=acme").status_code == 401  # still signed out
    assert session_rows(db_url) == []


def test_sign_out_deletes_the_session(tidings: Tidings, db_url: str) -> None:
    key = new_key(tidings, "acme", ["read"])
    http = browser(tidings)
    sign_in(http, key)
    stolen = http.cookies[SESSION]
    token = http.cookies[CSRF]
    out = http.post("/console/logout", data={"csrf": token})
    assert out.status_code == 200 and "Signed out" in out.text
    assert SESSION not in http.cookies  # the browser dropped it
    assert session_rows(db_url) == []
    replay = browser(tidings)
    replay.cookies.set(SESSION, stolen)
    assert replay.get("/console/").status_code == 401
    assert http.get("/console/logout").status_code == 405  # no state change on a GET


def test_revoking_the_key_ends_its_sessions(tidings: Tidings, db_url: str) -> None:
    admin = new_key(tidings, "acme", ["admin"])
    reader = new_key(tidings, "acme", ["read"])
    http, other = browser(tidings), browser(tidings)
    sign_in(http, reader)
    sign_in(other, admin)
    assert http.get("/console/").status_code == 200
    revoked = http.post(f"/v1/keys/{reader.split('_')[1]}/revoke", headers=auth(admin))
    assert revoked.status_code == 200
    assert http.get("/console/").status_code == 401
    assert [row[1] for row in session_rows(db_url)] == [admin.split("_")[1]]
    assert other.get("/console/").status_code == 200  # the admin's own session is untouched


def test_a_session_ends_with_its_lifetime_and_with_its_key(
    tidings: Tidings, clock: ManualClock
) -> None:
    admin = new_key(tidings, "acme", ["admin"])
    api = browser(tidings)
    short = api.post(
        "/v1/keys", json={"scopes": ["read"], "expires_in_seconds": 600}, headers=auth(admin)
    ).json()["key"]
    by_key, by_age = browser(tidings), browser(tidings)
    sign_in(by_key, short)
    sign_in(by_age, admin)
    clock.advance(601)
    assert by_key.get("/console/").status_code == 401  # the key expired, so did its session
    assert "expired" in sign_in(by_key, short).text
    assert by_age.get("/console/").status_code == 200
    clock.advance(12 * 3600)
    assert by_age.get("/console/").status_code == 401


def test_one_key_keeps_only_its_newest_sessions(
    tidings: Tidings, db_url: str, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tidings.store.console_sessions.MAX_SESSIONS_PER_KEY", 3)
    key = new_key(tidings, "acme", ["read"])
    browsers = [browser(tidings) for _ in range(5)]
    for each in browsers:
        sign_in(each, key)
        clock.advance(1)
    assert len(session_rows(db_url)) == 3
    assert [b.get("/console/").status_code for b in browsers] == [401, 401, 200, 200, 200]


@pytest.mark.parametrize(
    ("case", "status"),
    [
        ("no token", 403),
        ("token of another browser", 403),
        ("token without its cookie", 403),
        ("cross-site origin", 403),
        ("null origin", 403),
        ("own origin", 303),
        ("no origin header", 303),
    ],
)
def test_the_sign_in_form_cannot_be_forged(
    tidings: Tidings, db_url: str, case: str, status: int
) -> None:
    key = new_key(tidings, "acme", ["read"])
    http = browser(tidings)
    token = form_token(http)
    headers: dict[str, str] = {}
    if case == "no token":
        token = ""
    elif case == "token of another browser":
        token = form_token(browser(tidings))
    elif case == "token without its cookie":
        http.cookies.delete(CSRF)
    elif case == "cross-site origin":
        headers["Origin"] = "https://attacker.example"
    elif case == "null origin":
        headers["Origin"] = "null"
    elif case == "own origin":
        headers["Origin"] = "http://testserver"
    answer = sign_in(http, key, token, headers)
    assert answer.status_code == status, answer.text
    assert (SESSION in http.cookies) == (status == 303)
    assert len(session_rows(db_url)) == (1 if status == 303 else 0)


def test_sign_out_cannot_be_forged(tidings: Tidings, db_url: str) -> None:
    http = browser(tidings)
    sign_in(http, new_key(tidings, "acme", ["read"]))
    token = http.cookies[CSRF]
    forged = http.post(
        "/console/logout", data={"csrf": token}, headers={"Origin": "https://attacker.example"}
    )
    assert forged.status_code == 403
    assert http.post("/console/logout", data={}).status_code == 403
    assert len(session_rows(db_url)) == 1 and http.get("/console/").status_code == 200


def test_cookies_are_httponly_strict_and_secure_behind_an_https_public_url(
    tidings: Tidings,
) -> None:
    key = new_key(tidings, "acme", ["read"])
    public = "https://notify.example.com"
    # The proxy terminates TLS and forwards plain http: the public URL decides.
    page = browser(tidings, public_base_url=public).get("/console/")
    assert "secure" in page.headers["set-cookie"].lower()
    http = browser(tidings, public_base_url=public, base_url=public)
    signed = sign_in(http, key, headers={"Origin": public})  # the public origin is ours
    assert signed.status_code == 303, signed.text
    cookies = {c.split("=", 1)[0]: c.lower() for c in signed.headers.get_list("set-cookie")}
    assert set(cookies) == {SESSION}  # the token cookie was set with the form
    for flag in ("httponly", "samesite=strict", "secure", "path=/console"):
        assert flag in cookies[SESSION]
    plain = browser(tidings).get("/console/")  # http and no public URL: a dev setup
    assert "secure" not in plain.headers["set-cookie"].lower()
    assert "httponly" in plain.headers["set-cookie"].lower()


def test_the_public_base_url_setting_reaches_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDINGS_PUBLIC_BASE_URL", "https://notify.example.com")
    assert ApiSettings.from_settings(Settings()).public_base_url == "https://notify.example.com"
