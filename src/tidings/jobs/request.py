"""A bulk job request, validated before anything is written.

Its audience comes from exactly one place: a list given inline (small
audiences), an uploaded audience by id (`audience_upload`), or, for library
callers, any other iterable, which is validated member by member as it is
staged and never held whole (`audience_stream`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from tidings.domain.channels import Mode
from tidings.domain.errors import InvalidInput
from tidings.domain.keys import check_key
from tidings.domain.moments import optional_moment
from tidings.domain.recipients import Channel, check_timezone, normalize_email, normalize_phone
from tidings.domain.storable import check_fields

MAX_AUDIENCE = 5_000_000


@dataclass(frozen=True)
class AudienceMember:
    ref: str
    phone: str | None  # normalized E.164
    phone_country: str | None
    email: str | None  # normalized
    timezone: str | None
    locale: str | None
    preferences: tuple[str, ...]
    variables: Mapping[str, Any]


@dataclass(frozen=True)
class JobRequest:
    idempotency_key: str
    event_class: str
    purpose: str
    template_name: str
    template_revision: int | None
    channels: tuple[str, ...]
    mode: Mode
    variables: Mapping[str, Any]
    audience: Sequence[AudienceMember]
    audience_upload: UUID | None = None
    audience_stream: Iterable[object] | None = None
    event_reason: str | None = None
    report: tuple[str, int] | None = None
    token_ttl_seconds: int | None = None
    expires_at: datetime | None = None


def parse_job(raw: Mapping[str, Any]) -> JobRequest:
    # The audience is checked member by member where it is read (it may be
    # a stream); every other field here must be storable text or JSON.
    check_fields({k: v for k, v in raw.items() if k != "audience"})
    channels = _channels(raw.get("channels"))
    template = raw.get("template")
    if isinstance(template, str):
        template = {"name": template}
    if not isinstance(template, Mapping) or not isinstance(template.get("name"), str):
        raise InvalidInput("template", "a template name is required")
    audience, upload, stream = _audience_source(raw.get("audience"), raw.get("audience_upload"))
    return JobRequest(
        idempotency_key=check_key(raw.get("idempotency_key")),
        event_class=_text("event_class", raw.get("event_class")),
        purpose=_text("purpose", raw.get("purpose")),
        template_name=template["name"],
        template_revision=template.get("revision"),
        channels=channels,
        mode=_mode(raw.get("channel_mode", "preferred")),
        variables=dict(raw.get("variables") or {}),
        audience=audience,
        audience_upload=upload,
        audience_stream=stream,
        event_reason=raw.get("event_reason"),
        report=_report(raw.get("report")),
        token_ttl_seconds=_ttl(raw.get("token_ttl_seconds")),
        expires_at=_expiry(raw.get("expires_at")),
    )


def _text(field: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise InvalidInput(field, "is required (at most 200 characters)")
    return value


def _channels(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not value:
        raise InvalidInput("channels", "list at least one of sms, email")
    out = []
    for item in value:
        try:
            out.append(Channel(str(item)).value)
        except ValueError:
            raise InvalidInput("channels", f"unknown channel {item!r}") from None
    if len(set(out)) != len(out):
        raise InvalidInput("channels", "a channel is listed twice")
    return tuple(out)


def _mode(value: object) -> Mode:
    try:
        return Mode(str(value))
    except ValueError:
        raise InvalidInput("channel_mode", "use preferred, all or first_available") from None


def _report(value: object) -> tuple[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not isinstance(value.get("id"), str):
        raise InvalidInput("report", "needs an id and a revision")
    revision = value.get("revision")
    if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
        raise InvalidInput("report.revision", "must be a positive integer")
    return value["id"], revision


def _ttl(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 60 <= value <= 30 * 86400:
        raise InvalidInput("token_ttl_seconds", "must be between 60 and 2592000")
    return value


def _expiry(value: object) -> datetime | None:
    # Aware and bounded: a naive time could not be compared with the token
    # expiry (a 500), an unbounded one could not be read back by workers.
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidInput("expires_at", "is not an ISO-8601 time") from None
    return optional_moment("expires_at", value)


def _audience_source(
    audience: object, upload: object
) -> tuple[list[AudienceMember], UUID | None, Iterable[object] | None]:
    if audience is not None and upload is not None:
        raise InvalidInput("audience_upload", "give either audience or audience_upload, not both")
    if upload is not None:
        return [], _upload_id(upload), None
    if audience is None:
        raise InvalidInput("audience", "give the recipients, or an audience_upload id")
    if isinstance(audience, list | tuple):
        return _audience(audience), None, None
    if isinstance(audience, Iterable) and not isinstance(audience, str | bytes | Mapping):
        return [], None, audience
    raise InvalidInput("audience", "must be a list (or, from Python, an iterable) of recipients")


def _upload_id(value: object) -> UUID:
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value))
    except ValueError:
        raise InvalidInput("audience_upload", "not an audience upload id") from None


def _audience(value: list[object] | tuple[object, ...]) -> list[AudienceMember]:
    if not value:
        raise InvalidInput("audience", "at least one recipient is required")
    if len(value) > MAX_AUDIENCE:
        raise InvalidInput("audience", f"at most {MAX_AUDIENCE} recipients")
    members = [parse_member(item, f"audience[{i}]") for i, item in enumerate(value)]
    refs = [m.ref for m in members]
    if len(set(refs)) != len(refs):
        raise InvalidInput("audience", "a recipient ref appears twice")
    return members


def parse_member(item: object, where: str = "") -> AudienceMember:
    """One recipient; errors name `<where>.<field>` (just the field if no `where`)."""

    def at(name: str) -> str:
        return f"{where}.{name}" if where else name

    if not isinstance(item, Mapping) or not isinstance(item.get("ref"), str) or not item["ref"]:
        raise InvalidInput(at("ref"), "a recipient reference is required")
    phone = country = email = None
    if item.get("phone") is not None:
        try:
            phone, country = normalize_phone(str(item["phone"]))
        except InvalidInput:
            raise InvalidInput(at("phone"), "not a valid international number") from None
    if item.get("email") is not None:
        try:
            email = normalize_email(str(item["email"]))
        except InvalidInput:
            raise InvalidInput(at("email"), "not a valid e-mail address") from None
    try:
        timezone = check_timezone(item.get("timezone"))
    except InvalidInput as exc:
        raise InvalidInput(at("timezone"), exc.message) from None
    preferences = item.get("preferences") or item.get("channels") or ()
    if isinstance(preferences, Mapping):
        preferences = preferences.get("channels", ())
    variables = item.get("variables") or {}
    if not isinstance(variables, Mapping):
        raise InvalidInput(at("variables"), "must be an object")
    check_fields({at("ref"): item["ref"], at("locale"): item.get("locale")})
    check_fields({at("variables"): variables})
    return AudienceMember(
        ref=item["ref"],
        phone=phone,
        phone_country=country,
        email=email,
        timezone=timezone,
        locale=item.get("locale"),
        preferences=tuple(str(p) for p in preferences),
        variables=dict(variables),
    )
