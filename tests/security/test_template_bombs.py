"""Template bombs (issue #20, item 5; DESIGN.md invariant 11).

A template is tenant input, and so are the variables it is rendered with.
The sandbox used to bound only `*` and `**`: two nested `range(100000)`
loops passed validation, and rendering them would have exhausted the
memory of every worker that claimed the intent. Now:

* what constants alone prove too large is refused at publish
  (`POST /v1/templates`, `tidings templates validate`) with
  TEMPLATE_TOO_LARGE;
* what only the variables make too large fails its intent at send time
  with RENDER_LIMIT, once, without retry, in bounded memory and time,
  while the rest of the batch (another tenant's intent too) is sent.
"""

from __future__ import annotations

import json
import resource
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from harness.hostile_cases import PUBLISH_BOMBS as BOMBS
from harness.hostile_cases import VARIABLE_BOMBS
from typer.testing import CliRunner

from tests.conftest import TEST_SECRET, publish_example_policy
from tests.integration.api_support import auth, client, intent_body, new_key, publish_offer
from tests.integration.dispatch_helpers import offer, sends, simulator, worker
from tidings import IntentState, ManualClock, Tidings
from tidings.cli import app as cli_app
from tidings.domain.errors import InvalidInput
from tidings.platform.settings import Settings
from tidings.templates.limits import RenderLimits
from tidings.templates.model import RenderError, TemplateRevision
from tidings.templates.render import render

HOSTILE, VICTIM = "hostile", "victim"


def _template(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "channel": "sms", "locale": "en", **spec}


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_a_provable_bomb_is_refused_at_publish(tidings: Tidings, bomb: str) -> None:
    key = new_key(tidings, HOSTILE)
    with client(tidings) as http:
        answer = http.post("/v1/templates", json=_template("bomb", BOMBS[bomb]), headers=auth(key))
        assert answer.status_code == 422, answer.text
        problem = answer.json()
        assert problem["code"] == "INVALID_INPUT"
        assert "TEMPLATE_TOO_LARGE" in {e["code"] for e in problem["errors"]}
        assert http.get("/v1/templates", headers=auth(key)).json()["items"] == []


def test_the_deploy_gate_refuses_a_bomb(tmp_path: Path) -> None:
    (tmp_path / "bomb.json").write_text(
        json.dumps(_template("bomb", BOMBS["nested_ranges"])), encoding="utf-8"
    )
    result = CliRunner().invoke(cli_app, ["templates", "validate", str(tmp_path)])
    assert result.exit_code == 1
    assert "TEMPLATE_TOO_LARGE" in result.output


def test_the_library_refuses_a_bomb(tidings: Tidings) -> None:
    with pytest.raises(InvalidInput) as refused:
        tidings.publish_template("bomb", channel="sms", body=BOMBS["nested_ranges"]["body"])
    assert refused.value.field == "template.body"
    assert "100000 iterations" in refused.value.message


def _publish(http: Any, key: str, name: str, body: str, variables: dict[str, Any]) -> None:
    answer = http.post(
        "/v1/templates",
        json={
            "name": name,
            "channel": "sms",
            "body": body,
            "required_variables": sorted(variables),
        },
        headers=auth(key),
    )
    assert answer.status_code == 201, answer.text


def _send(http: Any, t: Tidings, key: str, n: int, name: str, variables: dict[str, Any]) -> str:
    body = intent_body(t, n, template={"name": name}, variables=variables)
    answer = http.post("/v1/intents", json=body, headers=auth(key))
    assert answer.status_code in (200, 201), answer.text
    return str(answer.json()["id"])


def test_a_bomb_in_the_variables_fails_at_send_and_the_batch_goes_on(
    tidings: Tidings, clock: ManualClock
) -> None:
    hostile_key, victim_key = new_key(tidings, HOSTILE), new_key(tidings, VICTIM)
    publish_offer(tidings, HOSTILE)
    publish_offer(tidings, VICTIM)
    offer_variables = {"class_name": "Spin 7am", "deadline": "18:00"}
    with client(tidings) as http:
        bombs = {}
        for n, (name, (body, variables)) in enumerate(sorted(VARIABLE_BOMBS.items()), 1):
            _publish(http, hostile_key, name, body, variables)
            bombs[name] = _send(http, tidings, hostile_key, n, name, variables)
        hostile_offer = _send(http, tidings, hostile_key, 50, "waitlist_offer", offer_variables)
        victim_offer = _send(http, tidings, victim_key, 60, "waitlist_offer", offer_variables)

    core = simulator(clock)
    w = worker(tidings, core)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    started = time.monotonic()
    assert w.dispatch_once() == len(bombs) + 2  # one batch, every intent in it
    elapsed = time.monotonic() - started
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024

    hostile, victim = tidings.for_tenant(HOSTILE), tidings.for_tenant(VICTIM)
    for name, intent_id in bombs.items():
        got = hostile.get(intent_id)
        assert (got.state, got.decision_code) == (IntentState.FAILED, "RENDER_LIMIT"), name
    assert hostile.get(hostile_offer).state is IntentState.ACCEPTED
    assert victim.get(victim_offer).state is IntentState.ACCEPTED
    assert len(sends(core)) == 2  # nothing of the bombs reached the provider
    # Each render stopped at its bound: no worker memory or time spent on it.
    assert grown_mib < 200, grown_mib
    assert elapsed < 10, elapsed

    # Failed for good: later rounds do not claim the bombs again.
    clock.advance(timedelta(hours=1).total_seconds())
    assert w.dispatch_once() == 0
    assert len(sends(core)) == 2


def test_the_deadline_stops_a_render_within_the_iteration_limit() -> None:
    # 4 * 10^6 silent iterations: allowed by this iteration limit, not by the clock.
    revision = TemplateRevision(
        HOSTILE,
        "slow",
        1,
        "sms",
        "en",
        None,
        "{% for a in range(2000) %}{% for b in range(2000) %}{% endfor %}{% endfor %}done",
    )
    limits = RenderLimits(max_iterations=10**8, max_seconds=0.05)
    started = time.monotonic()
    with pytest.raises(RenderError) as failure:
        render(revision, {}, limits=limits)
    assert failure.value.reason == "render_limit"
    assert "time" in str(failure.value)
    assert time.monotonic() - started < 2


def test_the_workers_apply_the_configured_limits(db_url: str, clock: ManualClock) -> None:
    settings = Settings(template_max_output_bytes=1024)
    t = Tidings(db_url, clock=clock, secret_key=TEST_SECRET, settings=settings)
    try:
        publish_example_policy(t)
        t.publish_template(
            "waitlist_offer",
            channel="sms",
            body="{{ class_name }} {{ deadline }}",
            required_variables=["class_name", "deadline"],
        )
        small = offer(t, 1)
        large = offer(t, 2, variables={"class_name": "x" * 2000, "deadline": "18:00"})
        core = simulator(clock)
        assert worker(t, core).dispatch_once() == 2
        assert t.get(small.id).state is IntentState.ACCEPTED
        got = t.get(large.id)
        assert (got.state, got.decision_code) == (IntentState.FAILED, "RENDER_LIMIT")
    finally:
        t.close()
