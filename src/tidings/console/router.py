"""The operator console: server-rendered pages over one tenant's rows.

    app.include_router(console_router(tidings.runtime), prefix="/console")

Read-only by design: the console shows state and says which action is
available (the kill switch is an API call with an admin key), so a
stolen browser session cannot send, cancel or stop anything. Its only
forms, sign in and sign out, are POSTs checked against forgery
(`console.csrf`); the session cookie holds a random id, never the key.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, urlencode
from uuid import UUID

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape

from tidings.console import csrf, data
from tidings.console.auth import (
    COOKIE,
    Denied,
    Viewer,
    check_key,
    presented_key,
    viewer,
    within_rate,
)
from tidings.console.chart import progress_bar, states_chart
from tidings.observability.alerts.rules import duration_text
from tidings.runtime import Runtime
from tidings.store import console_sessions

# Everything the page loads comes from this router: no CDN, no inline script
# or style, no framing (clickjacking), no referrer to other sites (URLs name
# intents). "same-origin" rather than "no-referrer": under no-referrer a
# browser sends `Origin: null` with our own forms, defeating the origin check.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
SESSION_TTL = timedelta(hours=12)
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("tidings.console", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ts"] = _timestamp
    env.filters["age"] = lambda seconds: duration_text(seconds) if seconds is not None else "—"
    env.filters["num"] = lambda n: f"{n:,}"
    env.globals.update(
        progress_bar=progress_bar,
        states_chart=states_chart,
        safe_detail=data.safe_detail,
        state_order=data.STATE_ORDER,
        terminal=data.TERMINAL,
    )
    return env


def _static_files() -> dict[str, tuple[bytes, str]]:
    folder = resources.files("tidings.console").joinpath("static")
    found = {}
    for item in folder.iterdir():
        suffix = "." + item.name.rsplit(".", 1)[-1]
        if suffix in STATIC_TYPES:
            found[item.name] = (item.read_bytes(), STATIC_TYPES[suffix])
    return found


def console_router(
    runtime: Runtime, *, public_base_url: str | None = None, session_ttl: timedelta = SESSION_TTL
) -> APIRouter:
    """Pages for operators, to mount under `/console` next to the API.

    `public_base_url` (https://...) marks cookies Secure behind a proxy
    that terminates TLS, and names the origin the forms are posted from.
    """
    router = APIRouter(include_in_schema=False)
    env = _environment()
    static = _static_files()
    secure_by_config = (public_base_url or "").lower().startswith("https://")

    def cookie(request: Request, response: Response, name: str, value: str, age: int) -> None:
        response.set_cookie(
            name,
            value,
            max_age=age,
            path=_base(request) or "/",
            httponly=True,
            samesite="strict",
            # https here means TLS reached us, or a trusted proxy said so
            # (uvicorn's proxy headers, from FORWARDED_ALLOW_IPS only).
            secure=secure_by_config or request.url.scheme == "https",
        )

    def page(request: Request, template: str, status: int = 200, **context: Any) -> Response:
        base = _base(request)
        token = csrf.token_of(request) or csrf.new_token()
        html = env.get_template(template).render(
            base=base, now=runtime.clock.now(), csrf=token, **context
        )
        response = HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)
        if csrf.token_of(request) is None:
            cookie(request, response, csrf.CSRF_COOKIE, token, int(session_ttl.total_seconds()))
        return response

    def guarded(request: Request, render: Callable[[Viewer], Response]) -> Response:
        if "key" in request.query_params:
            # Keys are never taken from a URL (access logs, history, screen
            # shares): drop it unread and show the page without it.
            query = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "key"])
            target = request.url.path + (f"?{query}" if query else "")
            return RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)
        try:
            who = viewer(request, runtime)
        except Denied as denied:
            return refused(request, denied)
        return render(who)

    def refused(request: Request, denied: Denied) -> Response:
        if denied.status == 401:
            return page(request, "login.html", 401, message=denied.message)
        title = "Too many requests" if denied.status == 429 else "Not allowed"
        response = page(request, "error.html", denied.status, title=title, message=denied.message)
        if denied.retry_after is not None:
            response.headers["Retry-After"] = str(denied.retry_after)
        return response

    def forged(request: Request, form: dict[str, list[str]]) -> bool:
        submitted = (form.get(csrf.FIELD) or [""])[0]
        return not csrf.form_is_genuine(request, submitted, public_base_url)

    def sign_in(request: Request, key: str) -> str:
        principal = check_key(runtime, key, presented_key(request, runtime, key))
        within_rate(request, runtime, principal)
        with runtime.db.transaction() as conn:
            return console_sessions.start(conn, principal, runtime.clock.now(), session_ttl)

    @router.get("/", name="console_overview")
    def overview(request: Request) -> Response:
        def render(who: Viewer) -> Response:
            now = runtime.clock.now()
            with runtime.db.transaction() as conn:
                view = data.overview(conn, who.tenant, now)
            return page(request, "overview.html", view=view, tenant=who.tenant, active="overview")

        return guarded(request, render)

    @router.get("/jobs", name="console_jobs")
    def jobs(request: Request) -> Response:
        def render(who: Viewer) -> Response:
            with runtime.db.transaction() as conn:
                view = data.jobs(conn, who.tenant)
            return page(request, "jobs.html", view=view, tenant=who.tenant, active="jobs")

        return guarded(request, render)

    @router.get("/intents", name="console_find_intent")
    def find_intent(request: Request) -> Response:
        def render(who: Viewer) -> Response:
            wanted = (request.query_params.get("id") or "").strip()
            target = f"{_base(request)}/intents/{quote(wanted, safe='')}"
            return RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)

        return guarded(request, render)

    @router.get("/intents/{intent_id}", name="console_intent")
    def intent(request: Request, intent_id: str) -> Response:
        def render(who: Viewer) -> Response:
            view = None
            parsed = _uuid(intent_id)
            if parsed is not None:
                with runtime.db.transaction() as conn:
                    view = data.intent_page(conn, who.tenant, parsed)
            if view is None:
                message = f"No intent {intent_id!r} in tenant {who.tenant!r}."
                return page(request, "error.html", 404, title="Not found", message=message)
            return page(request, "intent.html", view=view, tenant=who.tenant, active="")

        return guarded(request, render)

    @router.post("/login", name="console_login")
    async def login(request: Request) -> Response:
        form = parse_qs((await request.body()).decode(errors="replace"))
        if forged(request, form):
            message = "That sign-in form did not come from this console; try again."
            return page(request, "login.html", 403, message=message)
        key = (form.get("key") or [""])[0].strip()
        try:
            session_id = await run_in_threadpool(sign_in, request, key)
        except Denied as denied:
            response = page(request, "login.html", denied.status, message=denied.message)
            if denied.retry_after is not None:
                response.headers["Retry-After"] = str(denied.retry_after)
            return response
        response = RedirectResponse(f"{_base(request)}/", status_code=303, headers=SECURITY_HEADERS)
        cookie(request, response, COOKIE, session_id, int(session_ttl.total_seconds()))
        return response

    @router.post("/logout", name="console_logout")
    async def logout(request: Request) -> Response:
        form = parse_qs((await request.body()).decode(errors="replace"))
        if forged(request, form):
            message = "That sign-out form did not come from this console."
            return page(request, "error.html", 403, title="Not allowed", message=message)
        await run_in_threadpool(end_session, request.cookies.get(COOKIE, ""))
        response = page(request, "login.html", 200, message="Signed out.")
        cookie(request, response, COOKIE, "", 0)  # same attributes, or a browser keeps it
        return response

    def end_session(session_id: str) -> None:
        with runtime.db.transaction() as conn:
            console_sessions.end(conn, session_id)

    @router.get("/static/{name}", name="console_static")
    def asset(name: str) -> Response:
        # Served from a fixed map of the package's files: no path is ever
        # built from the request, so nothing outside static/ can be read.
        found = static.get(name)
        if found is None:
            return Response(status_code=404)
        body, media_type = found
        return Response(body, media_type=media_type, headers={"Cache-Control": "max-age=300"})

    return router


def _base(request: Request) -> str:
    """The console's path prefix, wherever the app mounted the router."""
    return request.url_for("console_overview").path.rstrip("/")


def _uuid(value: str) -> UUID | None:
    try:
        return UUID(value)
    except ValueError:
        return None


def _timestamp(value: datetime | str | None) -> str:
    """UTC, to the second: what logs and provider dashboards show."""
    if value is None:
        return "—"
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
