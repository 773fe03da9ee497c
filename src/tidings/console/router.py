"""The operator console: server-rendered pages over one tenant's rows.

    app.include_router(console_router(tidings), prefix="/console")

Read-only by design: the console shows state and says which action is
available (the kill switch is an API call with an admin key), so a
stolen browser session cannot send, cancel or stop anything.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, urlencode
from uuid import UUID

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape

from tidings.client import Tidings
from tidings.console import data
from tidings.console.auth import COOKIE, COOKIE_MAX_AGE, Denied, Viewer, check_key, viewer
from tidings.console.chart import progress_bar, states_chart
from tidings.observability.alerts import duration_text

# Everything the page loads comes from this router: no CDN, no inline script
# or style, no framing (clickjacking), no referrer (URLs name intents).
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
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


def console_router(tidings: Tidings) -> APIRouter:
    """Pages for operators, to mount under `/console` next to the API."""
    router = APIRouter(include_in_schema=False)
    env = _environment()
    static = _static_files()

    def page(request: Request, template: str, status: int = 200, **context: Any) -> Response:
        base = _base(request)
        html = env.get_template(template).render(base=base, now=tidings.clock.now(), **context)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def guarded(request: Request, render: Callable[[Viewer], Response]) -> Response:
        key = request.query_params.get("key")
        try:
            who = viewer(request, tidings)
        except Denied as denied:
            if denied.status == 401:
                return page(request, "login.html", 401, message=denied.message)
            return page(request, "error.html", 403, title="Not allowed", message=denied.message)
        if key:  # move the key out of the URL (history, bookmarks, screenshots)
            query = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "key"])
            target = request.url.path + (f"?{query}" if query else "")
            response: Response = RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)
            _set_cookie(request, response, key)
            return response
        return render(who)

    @router.get("/", name="console_overview")
    def overview(request: Request) -> Response:
        def render(who: Viewer) -> Response:
            now = tidings.clock.now()
            with tidings.db.transaction() as conn:
                view = data.overview(conn, who.tenant, now)
            return page(request, "overview.html", view=view, tenant=who.tenant, active="overview")

        return guarded(request, render)

    @router.get("/jobs", name="console_jobs")
    def jobs(request: Request) -> Response:
        def render(who: Viewer) -> Response:
            with tidings.db.transaction() as conn:
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
                with tidings.db.transaction() as conn:
                    view = data.intent_page(conn, who.tenant, parsed)
            if view is None:
                message = f"No intent {intent_id!r} in tenant {who.tenant!r}."
                return page(request, "error.html", 404, title="Not found", message=message)
            return page(request, "intent.html", view=view, tenant=who.tenant, active="")

        return guarded(request, render)

    @router.post("/login", name="console_login")
    async def login(request: Request) -> Response:
        form = parse_qs((await request.body()).decode(errors="replace"))
        key = (form.get("key") or [""])[0].strip()
        try:
            await run_in_threadpool(check_key, tidings, key)
        except Denied as denied:
            return page(request, "login.html", denied.status, message=denied.message)
        response = RedirectResponse(f"{_base(request)}/", status_code=303)
        _set_cookie(request, response, key)
        return response

    @router.get("/logout", name="console_logout")
    def logout(request: Request) -> Response:
        response = page(request, "login.html", 200, message="Signed out.")
        response.delete_cookie(COOKIE, path=_base(request) or "/")
        return response

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


def _set_cookie(request: Request, response: Response, key: str) -> None:
    response.set_cookie(
        COOKIE,
        key,
        max_age=COOKIE_MAX_AGE,
        path=_base(request) or "/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


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
