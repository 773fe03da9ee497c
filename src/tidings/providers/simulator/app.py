"""The simulator's HTTP face: a FastAPI app over one `SimulatorCore`.

Route names are public (tests, the demo and the reliability suite use them):
send (`POST /sms/send`, `POST /email/send`), lookups (`GET /messages/{id}`,
`GET /messages?idempotency_key=`, `GET /{channel}/messages?to=&sent_after=`
and `?reference=`, each only where the profile's provider offers it: 501
`NOT_SUPPORTED` otherwise), providers' own wires (Twilio's Messages API,
Postmark's `/email` and `/messages/outbound`, SendGrid's `/v3/mail/send`,
Vonage's `/sms/json`, Infrai's `/v1/email/send`, `/v1/sms/send` and
`/v1/email/get/{id}`, AWS's SES v2 `/v2/email/outbound-emails`, End User
Messaging SMS and SNS at `POST /`, and the SNS signing certificate at
`/_aws/...pem`), and test controls under `/_`: `_ledger`,
`_reset`, `_config`, `_profiles`, `_advance`, `_receipts`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal
from urllib.parse import parse_qs

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field, ValidationError

from tidings.platform.signal_wait import sigterm_interrupts
from tidings.providers.simulator import (
    wire_aws,
    wire_aws_events,
    wire_infrai,
    wire_postmark,
    wire_sendgrid,
    wire_twilio,
    wire_vonage,
)
from tidings.providers.simulator.config import SimulatorConfig
from tidings.providers.simulator.core import LookupFailed, NotSupported, SimulatorCore
from tidings.providers.simulator.receipts import ReceiptDispatcher

NOT_FOUND = {"code": "NOT_FOUND"}


class SendBody(BaseModel):
    to: str
    body: str
    subject: str | None = None
    sender: str | None = None
    idempotency_key: str = Field(min_length=1)
    metadata: dict[str, str] = Field(default_factory=dict)
    attachments: list[dict[str, Any]] = Field(default_factory=list)
    template_id: str | None = None
    validity_seconds: int | None = None


class AdvanceBody(BaseModel):
    seconds: float = Field(ge=0)


def create_app(core: SimulatorCore | None = None, *, deliver_receipts: bool = True) -> FastAPI:
    core = core or SimulatorCore()
    dispatcher = ReceiptDispatcher(core) if deliver_receipts else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if dispatcher:
            dispatcher.start()
        yield
        if dispatcher:
            dispatcher.close()

    app = FastAPI(title="tidings provider simulator", lifespan=lifespan)
    app.state.core = core
    _send_routes(app, core)
    _wire_routes(app, core)
    _lookup_routes(app, core)
    _control_routes(app, core)
    return app


def _wire_routes(app: FastAPI, core: SimulatorCore) -> None:
    """Providers' own wires: Twilio's (wire_twilio.py), Postmark's
    (wire_postmark.py), SendGrid's (wire_sendgrid.py), Vonage's
    (wire_vonage.py), Infrai's (wire_infrai.py) and AWS's (wire_aws.py),
    for the real adapters."""

    @app.api_route("/2010-04-01/Accounts/{rest:path}", methods=["GET", "POST"])
    async def twilio(request: Request) -> JSONResponse:
        form: dict[str, str] = {}
        if request.method == "POST":
            # parse_qs, not request.form(): no multipart parser is needed for a form post.
            form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
        reply = wire_twilio.answer(
            core,
            wire_twilio.account_of(core.config),
            request.method,
            request.url.path,
            dict(request.query_params),
            form,
            request.headers.get("authorization"),
        )
        await asyncio.sleep(reply.latency_s + reply.stall_s)
        return JSONResponse(reply.body, reply.status_code, headers=reply.headers)

    # Postmark's own wire (wire_postmark.py), for the real Postmark adapter;
    # registered before `/messages/{message_id}`, which would take "outbound".
    @app.post(wire_postmark.SEND_PATH)
    @app.get(wire_postmark.SEARCH_PATH)
    @app.get(wire_postmark.SEARCH_PATH + "/{message_id}/details")
    async def postmark(request: Request) -> JSONResponse:
        reply = wire_postmark.answer(
            core,
            wire_postmark.server_of(core.config),
            request.method,
            request.url.path,
            dict(request.query_params),
            await request.body(),
            request.headers.get("x-postmark-server-token"),
        )
        await asyncio.sleep(reply.latency_s + reply.stall_s)
        return JSONResponse(reply.body, reply.status_code, headers=reply.headers)

    @app.post(wire_sendgrid.SEND_PATH)
    @app.get(wire_sendgrid.PUBLIC_KEY_PATH)
    @app.get(wire_sendgrid.PUBLIC_KEY_PATH + "/{webhook_id}")
    async def sendgrid(request: Request) -> Response:
        reply = wire_sendgrid.answer(
            core,
            wire_sendgrid.account_of(core.config),
            request.method,
            request.url.path,
            await request.body(),
            request.headers.get("authorization"),
        )
        await asyncio.sleep(reply.latency_s + reply.stall_s)
        if reply.status_code == 202:  # SendGrid's accept has an empty body
            return Response(status_code=202, headers=reply.headers)
        return JSONResponse(reply.body, reply.status_code, headers=reply.headers)

    @app.post(wire_vonage.SEND_PATH)
    async def vonage(request: Request) -> JSONResponse:
        params = wire_vonage.params_of(
            request.headers.get("content-type", ""), await request.body()
        )
        reply = wire_vonage.answer(core, wire_vonage.account_of(core.config), params)
        await asyncio.sleep(reply.latency_s + reply.stall_s)
        return JSONResponse(reply.body, reply.status_code, headers=reply.headers)

    @app.post(wire_infrai.EMAIL_SEND_PATH)
    @app.post(wire_infrai.SMS_SEND_PATH)
    @app.get(wire_infrai.GET_PATH + "/{message_id}")
    async def infrai(request: Request) -> JSONResponse:
        reply = wire_infrai.answer(
            core,
            wire_infrai.account_of(core.config),
            request.method,
            request.url.path,
            await request.body(),
            request.headers.get("authorization"),
        )
        await asyncio.sleep(reply.latency_s + reply.stall_s)
        return JSONResponse(reply.body, reply.status_code, headers=reply.headers)

    @app.post(wire_aws.SES_PATH)
    @app.post("/")
    async def aws(request: Request) -> Response:
        wire = wire_aws.answer(
            core,
            wire_aws.account_of(core.config),
            request.method,
            request.url.path,
            dict(request.headers),
            await request.body(),
        )
        await asyncio.sleep(wire.latency_s + wire.stall_s)
        return Response(wire.body, wire.status_code, headers=wire.headers)

    @app.get(wire_aws_events.CERT_PATH)
    async def aws_certificate() -> Response:
        pem = wire_aws_events.certificate_pem()
        return Response(pem, 200, media_type="application/x-x509-ca-cert")


def _send_routes(app: FastAPI, core: SimulatorCore) -> None:
    async def answer(channel: Literal["sms", "email"], body: SendBody) -> JSONResponse:
        reply = core.send(channel, body.model_dump())
        # The core already recorded (and maybe accepted) the message; a stall
        # holds the answer back so the client times out on a done deed.
        await asyncio.sleep(reply.latency_s + reply.stall_s)
        return JSONResponse(reply.body, reply.status_code, headers=reply.headers)

    @app.post("/sms/send", status_code=201)
    async def send_sms(body: SendBody) -> JSONResponse:
        return await answer("sms", body)

    @app.post("/email/send", status_code=201)
    async def send_email(body: SendBody) -> JSONResponse:
        return await answer("email", body)


def _lookup_routes(app: FastAPI, core: SimulatorCore) -> None:
    """What the current profile's provider offers; anything else is 501."""

    @app.exception_handler(NotSupported)
    async def not_supported(_: Request, exc: NotSupported) -> JSONResponse:
        return JSONResponse({"code": "NOT_SUPPORTED", "detail": str(exc)}, 501)

    @app.exception_handler(LookupFailed)
    async def lookup_failed(_: Request, exc: LookupFailed) -> JSONResponse:
        return JSONResponse({"code": "PROVIDER_ERROR"}, 500)

    @app.get("/messages/{message_id}")
    async def get_message(message_id: str) -> JSONResponse:
        found = core.lookup(message_id)
        return JSONResponse(found) if found else JSONResponse(NOT_FOUND, 404)

    @app.get("/messages")
    async def find_message(idempotency_key: str) -> JSONResponse:
        found = core.find_by_key(idempotency_key)
        return JSONResponse(found) if found else JSONResponse(NOT_FOUND, 404)

    @app.get("/{channel}/messages")
    async def search_messages(
        channel: Literal["sms", "email"],
        to: str | None = None,
        sent_after: float | None = None,
        sent_before: float | None = None,
        reference: str | None = None,
    ) -> JSONResponse:
        """The list search (`to`, a time range in Unix seconds) or the search
        by a reference of ours, as the profile's provider offers them."""
        if reference is not None:
            return JSONResponse({"messages": core.find_by_reference(channel, reference)})
        if to is None or sent_after is None:
            return JSONResponse({"code": "INVALID_SEARCH"}, 400)
        return JSONResponse({"messages": core.search(channel, to, sent_after, sent_before)})


def _control_routes(app: FastAPI, core: SimulatorCore) -> None:
    @app.get("/_ledger")
    async def ledger(idempotency_key: str | None = None) -> list[dict[str, Any]]:
        return core.ledger(idempotency_key)

    @app.post("/_reset")
    async def reset(config: bool = False) -> dict[str, Any]:
        core.reset(config=config)
        return {"ok": True}

    @app.get("/_config")
    async def get_config() -> SimulatorConfig:
        return core.config

    @app.get("/_profiles")
    async def get_profiles() -> dict[str, dict[str, object]]:
        """What each channel's provider offers under the current profile."""
        return core.profiles()

    @app.put("/_config")
    async def put_config(changes: dict[str, Any]) -> JSONResponse:
        try:
            return JSONResponse(core.configure(changes).model_dump())
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_context=False, include_input=False)
            return JSONResponse({"code": "INVALID_CONFIG", "errors": errors}, 422)

    @app.post("/_advance")
    async def advance(body: AdvanceBody) -> dict[str, Any]:
        core.advance(body.seconds)
        return {"ok": True}

    @app.get("/_receipts")
    async def receipts() -> list[dict[str, Any]]:
        return core.receipts()

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"ok": True}


def serve(host: str, port: int, *, log_level: str = "warning", **config: Any) -> None:
    config.setdefault("public_url", f"http://{host}:{port}")
    core = SimulatorCore(SimulatorConfig(**config))
    # A short graceful shutdown: stalled "timeout" answers must not hold up
    # exit. A SIGTERM stop exits 0, as `tidings serve`'s does.
    with contextlib.suppress(KeyboardInterrupt), sigterm_interrupts():
        uvicorn.run(
            create_app(core), host=host, port=port, log_level=log_level, timeout_graceful_shutdown=1
        )
