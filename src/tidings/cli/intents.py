"""`tidings intents list|show`: find intents from a shell (docs/finding.md).

`--json` prints what GET /v1/intents and GET /v1/intents/{id} answer, so a
script can use either.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

import typer

from tidings.cli.common import console, open_tidings

intents_app = typer.Typer(help="Intents: list, show.", no_args_is_help=True)

Tenant = Annotated[str | None, typer.Option(help="The tenant (default: TIDINGS_TENANT)")]
Json = Annotated[bool, typer.Option("--json", help="Print the API's JSON")]


def _instant(text: str | None) -> datetime | None:
    from tidings.cli.keys import parse_instant

    return parse_instant(text) if text else None


@intents_app.command("list")
def list_intents(
    key: Annotated[str | None, typer.Option(help="The idempotency key")] = None,
    recipient: Annotated[str | None, typer.Option(help="The recipient ref")] = None,
    event_class: Annotated[str | None, typer.Option()] = None,
    state: Annotated[str | None, typer.Option()] = None,
    correlation_id: Annotated[str | None, typer.Option()] = None,
    since: Annotated[str | None, typer.Option(help="Created at or after (ISO 8601)")] = None,
    until: Annotated[str | None, typer.Option(help="Created before (ISO 8601)")] = None,
    limit: Annotated[int, typer.Option(min=1, max=200)] = 50,
    cursor: Annotated[str | None, typer.Option(help="`next_cursor` of the last page")] = None,
    tenant: Tenant = None,
    as_json: Json = False,
) -> None:
    """List intents, newest first; every filter given must match."""
    from tidings.api.schemas.listing import IntentPageOut

    with open_tidings(tenant) as t:
        page = t.list_intents(
            idempotency_key=key,
            recipient_ref=recipient,
            event_class=event_class,
            state=state,
            correlation_id=correlation_id,
            created_from=_instant(since),
            created_to=_instant(until),
            limit=limit,
            cursor=cursor,
        )
    if as_json:
        _print_json(IntentPageOut.of(page).model_dump(mode="json"))
        return
    for i in page.items:
        console.print(
            f"{i.id}  {i.created_at:%Y-%m-%d %H:%M:%S}  {i.channel:5}  {i.state:12}  "
            f"{i.recipient_ref}  {i.idempotency_key}",
            soft_wrap=True,
            markup=False,
        )
    if page.next_cursor:
        console.print(f"more: --cursor {page.next_cursor}", soft_wrap=True, markup=False)


@intents_app.command("show")
def show(
    intent: Annotated[str, typer.Argument(help="The intent id")],
    tenant: Tenant = None,
    as_json: Json = False,
) -> None:
    """One intent and its attempts."""
    from tidings.api.schemas.intents import IntentOut
    from tidings.cli.timeline import intent_summary

    with open_tidings(tenant) as t:
        found = t.get(intent)
    if as_json:
        _print_json(IntentOut.of(found).model_dump(mode="json"))
    else:
        console.print(intent_summary(found), soft_wrap=True)


def _print_json(document: dict[str, Any]) -> None:
    # Plain print: rich would wrap long lines and colour the output.
    print(json.dumps(document, indent=2))
