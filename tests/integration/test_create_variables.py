"""Required variables are checked when an intent is created: a create that
would only fail at render is refused (422 MISSING_VARIABLES, `InvalidInput`
in the library) and nothing is created. Variables a minter fills at
dispatch are declared on the template and exempt."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tidings import IntentState, InvalidInput, ManualClock, Tidings

from .api_support import count, intent_body, is_problem
from .dispatch_helpers import offer, publish_offer_template, simulator, worker


def publish_reset(t: Tidings) -> None:
    t.publish_template(
        "password_reset",
        channel="sms",
        body="Hi {{ name }}, reset your password: {{ reset_link }}",
        required_variables=["name", "reset_link"],
        dispatch_variables=["reset_link"],
    )


def reset(t: Tidings, **variables: str) -> object:
    return t.notify(
        idempotency_key="reset:player-7",
        channel="sms",
        recipient={"ref": "player-7", "phone": "+14155550123"},
        template="password_reset",
        variables=variables,
        purpose="security",
        event_class="password_reset",
    )


def test_a_create_without_required_variables_is_refused(tidings: Tidings, db_url: str) -> None:
    publish_offer_template(tidings)
    with pytest.raises(InvalidInput) as raised:
        offer(tidings, variables={"class_name": "Spin 7am"})
    assert raised.value.code == "MISSING_VARIABLES" and raised.value.field == "variables"
    assert raised.value.missing == ("deadline",)  # type: ignore[attr-defined]
    assert "deadline" in str(raised.value)
    assert count(db_url, "intents") == 0


def test_variables_filled_at_dispatch_are_exempt(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish_reset(tidings)
    with pytest.raises(InvalidInput, match="name"):
        reset(tidings)  # `name` is the caller's to give
    intent = reset(tidings, name="Ada")
    assert intent.state is IntentState.PENDING  # type: ignore[attr-defined]
    w = worker(tidings, simulator(clock))
    w.minters["password_reset"] = lambda _: {"reset_link": "https://play.example/r?t=x"}
    w.dispatch_once()
    assert tidings.get(intent.id).state is IntentState.ACCEPTED  # type: ignore[attr-defined]


def test_a_publish_must_declare_dispatch_variables_as_required(tidings: Tidings) -> None:
    with pytest.raises(InvalidInput, match="dispatch_variables"):
        tidings.publish_template(
            "password_reset",
            channel="sms",
            body="{{ reset_link }}",
            required_variables=["reset_link"],
            dispatch_variables=["token"],
        )


def test_missing_variables_over_http(api: TestClient, tidings: Tidings, db_url: str) -> None:
    answer = api.post("/v1/intents", json=intent_body(tidings, variables={}))
    problem = is_problem(answer, 422, "MISSING_VARIABLES")
    assert problem["missing"] == ["class_name", "deadline"] and problem["field"] == "variables"
    assert count(db_url, "intents") == 0
    template = {
        "name": "password_reset",
        "channel": "sms",
        "body": "Hi {{ name }}: {{ reset_link }}",
        "required_variables": ["name", "reset_link"],
        "dispatch_variables": ["reset_link"],
    }
    assert api.post("/v1/templates", json=template).status_code == 201
    listed = {t["name"]: t for t in api.get("/v1/templates").json()["items"]}
    assert listed["password_reset"]["dispatch_variables"] == ["reset_link"]
    body = intent_body(
        tidings,
        template={"name": "password_reset"},
        variables={"name": "Ada"},
        purpose="security",
        event_class="password_reset",
    )
    assert api.post("/v1/intents", json=body).status_code == 201


def test_the_openapi_document_shows_missing_variables(api: TestClient) -> None:
    document = api.get("/openapi.json").json()
    create = document["paths"]["/v1/intents"]["post"]["responses"]["422"]
    example = create["content"]["application/problem+json"]["example"]
    assert example["code"] == "MISSING_VARIABLES" and example["missing"] == ["deadline"]
    template = document["components"]["schemas"]["TemplateIn"]["properties"]
    assert template["dispatch_variables"]["examples"] == [["reset_link"]]
