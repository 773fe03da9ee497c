"""What the OpenAPI document says about errors.

Each route lists the problem statuses it can answer (`responses`), so
clients and schemathesis know every status; `problems_as_problem_json`
then files those answers under `application/problem+json`, the media type
they are really sent with.
"""

from __future__ import annotations

from typing import Any

from fastapi.routing import APIRoute

from tidings.api.problems import MEDIA_TYPE, Problem

NOT_FOUND = 404
WITH_BODY = (413, 422)
# Every authenticated route may answer 429: the tenant's request rate.
AUTH = (401, 403, 429)

_DESCRIPTIONS = {
    400: "Malformed request",
    401: "No valid API key (or webhook signature)",
    403: "The API key lacks the scope",
    404: "No such resource for this tenant",
    408: "The body arrived too slowly; the connection is closed",
    409: "Conflicts with the current state",
    413: "The body is too large",
    415: "The body is not in the media type this operation reads",
    422: "Invalid input; nothing was changed",
    429: "Too many requests for this tenant; retry after `Retry-After` seconds",
    503: "Unavailable",
    504: "A name the request depends on did not resolve in time",
}


# The operationId a client generator turns into a method name: the route
# function's name, or a clearer one where the function's reads badly.
_OPERATION_IDS = {
    "healthz": "get_health",
    "cancel_matching": "cancel_intents",
    "intent_timeline": "get_intent_timeline",
    "post_job": "create_job",
    "get_recipients": "list_job_recipients",
    "post_audience": "upload_audience",
    "opt_out": "opt_out_contact",
    "kill_switch": "set_kill_switch",
    "shadow_mode": "set_shadow_mode",
    "shadow_mode_report": "get_shadow_mode_report",
    "rollout_report": "get_rollout_report",
    "put_event_webhook": "set_event_webhook",
}
_PROBLEM_REF = "#/components/schemas/Problem"
# FastAPI's own 422 schema: tidings never answers with it (problems.py).
_FASTAPI_VALIDATION = ("HTTPValidationError", "ValidationError")


def operation_id(route: APIRoute) -> str:
    """`generate_unique_id_function` of the app: one stable name per route."""
    return _OPERATION_IDS.get(route.name, route.name)


def responses(
    *statuses: int, auth: bool = True, extra: dict[int | str, dict[str, Any]] | None = None
) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a route: problems for `statuses` (+401/403 if `auth`)."""
    wanted = sorted({*statuses, *(AUTH if auth else ())})
    found: dict[int | str, dict[str, Any]] = {
        s: {"model": Problem, "description": _DESCRIPTIONS[s]} for s in wanted
    }
    found.update(extra or {})
    return found


def problems_as_problem_json(document: dict[str, Any]) -> dict[str, Any]:
    """Move every 4xx/5xx answer's schema to `application/problem+json`, and
    describe every 422 as the problem document it really is."""
    for path in document.get("paths", {}).values():
        for operation in path.values():
            for status, answer in operation.get("responses", {}).items():
                content = answer.get("content", {})
                if str(status)[0] in "45" and "application/json" in content:
                    content[MEDIA_TYPE] = content.pop("application/json")
                if str(status) == "422" and MEDIA_TYPE in content:
                    content[MEDIA_TYPE]["schema"] = {"$ref": _PROBLEM_REF}
                    if answer.get("description") == "Validation Error":
                        answer["description"] = _DESCRIPTIONS[422]
    schemas = document.get("components", {}).get("schemas", {})
    for name in _FASTAPI_VALIDATION:
        schemas.pop(name, None)
    return document
