"""A cancel cannot unsend, and nothing may read as if it did (issue 40,
point 5): an intent canceled after its message went out says so beside its
state, in the API, the CLI and the console."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tests.conftest import TEST_SECRET
from tidings import IntentState, ManualClock, Tidings
from tidings.cli.main import app

from .api_support import auth, client, new_key
from .dispatch_helpers import offer, publish_offer_template, simulator, worker

SAID = "canceled after the message was accepted by the provider: a cancel cannot unsend it"


def test_a_cancel_after_the_send_says_the_message_went_out_everywhere(
    tidings: Tidings, clock: ManualClock, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.security.test_console_session import browser, sign_in

    publish_offer_template(tidings)
    sent, unsent = offer(tidings, 1), offer(tidings, 2, expires_at=None)
    tidings.cancel(unsent.id, reason="member_left")
    worker(tidings, simulator(clock)).dispatch_once()
    assert tidings.get(sent.id).state is IntentState.ACCEPTED
    tidings.cancel(sent.id, reason="member_left")

    http = client(tidings)
    http.headers.update(auth(new_key(tidings, tidings.tenant)))
    assert http.get(f"/v1/intents/{sent.id}").json()["state_note"] == SAID
    assert http.get(f"/v1/intents/{unsent.id}").json()["state_note"] is None

    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("TIDINGS_SECRET_KEY", TEST_SECRET)
    for command in (["intents", "show", str(sent.id)], ["timeline", str(sent.id)]):
        shown = CliRunner().invoke(app, [*command, "--tenant", tidings.tenant])
        assert shown.exit_code == 0, shown.output
        assert SAID in " ".join(shown.output.split()), shown.output

    console = browser(tidings)
    assert sign_in(console, new_key(tidings, tidings.tenant)).status_code in (302, 303)
    page = console.get(f"/console/intents/{sent.id}")
    assert page.status_code == 200 and SAID in page.text
    assert SAID not in console.get(f"/console/intents/{unsent.id}").text


def test_the_timeline_prints_json_and_is_not_cut_when_piped(
    tidings: Tidings, clock: ManualClock, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    publish_offer_template(tidings)
    sent = offer(tidings, 1)
    worker(tidings, simulator(clock)).dispatch_once()
    tidings.cancel(sent.id, reason="member_left")
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("TIDINGS_SECRET_KEY", TEST_SECRET)
    args = ["timeline", str(sent.id), "--tenant", tidings.tenant]

    shown = CliRunner().invoke(app, [*args, "--json"])
    assert shown.exit_code == 0, shown.output
    document = json.loads(shown.output)
    assert document["intent"]["state_note"] == SAID
    moves = [e for e in document["timeline"]["entries"] if e["kind"] == "transition"]
    assert [(e["from"], e["to"]) for e in moves] == [
        (None, "pending"),
        ("pending", "sending"),
        ("sending", "accepted"),
        ("accepted", "canceled"),
    ]

    piped = CliRunner().invoke(app, args)  # not a terminal: nothing cut to 80 columns
    assert SAID in piped.output.splitlines(), piped.output
    assert any(str(sent.id) in line and "key=" in line for line in piped.output.splitlines())
