"""`tidings suppressions list|show|lift`: review suppressions with their evidence
and lift one, saying why (docs/providers.md, "Reviewing and lifting
suppressions"). `--json` prints what GET /v1/suppressions answers."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from tidings.cli.common import console, errors, open_tidings
from tidings.domain.suppressions import Suppression

suppressions_app = typer.Typer(help="Suppressions: list, show, lift.", no_args_is_help=True)

Tenant = Annotated[str | None, typer.Option(help="The tenant (default: TIDINGS_TENANT)")]


@suppressions_app.command("list")
def list_suppressions(
    reason: Annotated[
        str | None, typer.Option(help="hard_bounce, complaint, operator or invalid")
    ] = None,
    provider: Annotated[str | None, typer.Option(help="The provider whose answer it was")] = None,
    channel: Annotated[str | None, typer.Option(help="sms or email")] = None,
    since: Annotated[str | None, typer.Option(help="Created at or after (ISO 8601)")] = None,
    lifted: Annotated[bool, typer.Option("--lifted", help="List lifted ones instead")] = False,
    limit: Annotated[int, typer.Option(min=1, max=200)] = 50,
    cursor: Annotated[str | None, typer.Option(help="`next_cursor` of the last page")] = None,
    tenant: Tenant = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the API's JSON")] = False,
) -> None:
    """List suppressions newest first, with their evidence; every filter must match."""
    from tidings.api.schemas.suppressions import SuppressionPageOut
    from tidings.cli.keys import parse_instant
    from tidings.domain.errors import InvalidInput

    with open_tidings(tenant) as t:
        try:
            page = t.list_suppressions(
                reason=reason,
                provider=provider,
                channel=channel,
                since=parse_instant(since) if since else None,
                lifted=lifted,
                limit=limit,
                cursor=cursor,
            )
        except InvalidInput as exc:  # a reason or cursor this engine does not know
            errors.print(f"error: {exc}", soft_wrap=True, markup=False, highlight=False)
            raise typer.Exit(2) from None
    if as_json:
        print(json.dumps(SuppressionPageOut.of(page).model_dump(mode="json"), indent=2))
        return
    for s in page.items:
        console.print(_line(s), soft_wrap=True, markup=False, highlight=False)
    if page.next_cursor:
        console.print(f"more: --cursor {page.next_cursor}", soft_wrap=True, markup=False)


@suppressions_app.command("show")
def show(
    suppression: Annotated[str, typer.Argument(help="The suppression id")],
    tenant: Tenant = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the API's JSON")] = False,
) -> None:
    """One suppression, active or lifted, with its evidence. Exit 1 when the
    id is unknown."""
    from tidings.api.schemas.suppressions import SuppressionOut
    from tidings.domain.errors import NotFound

    with open_tidings(tenant) as t:
        try:
            found = t.suppression(suppression)
        except NotFound as exc:
            errors.print(f"error: {exc}", soft_wrap=True, markup=False, highlight=False)
            raise typer.Exit(1) from None
    if as_json:
        print(json.dumps(SuppressionOut.of(found).model_dump(mode="json"), indent=2))
    else:
        console.print(_line(found), soft_wrap=True, markup=False, highlight=False)


@suppressions_app.command("lift")
def lift(
    suppression: Annotated[str, typer.Argument(help="The suppression id")],
    reason: Annotated[str, typer.Option(help="Why it is lifted; kept with the lift")],
    tenant: Tenant = None,
) -> None:
    """Lift a suppression: the address may be sent to again. Exit 1 when the
    id is unknown or the suppression was lifted already."""
    from tidings.domain.errors import AlreadyLifted, InvalidInput, NotFound

    with open_tidings(tenant) as t:
        try:
            done = t.lift_suppression(suppression, reason=reason, actor="cli")
        except (NotFound, AlreadyLifted, InvalidInput) as exc:
            errors.print(f"error: {exc}", soft_wrap=True, markup=False, highlight=False)
            raise typer.Exit(1) from None
    console.print(f"lifted {done.id} ({done.channel}, {done.reason})", markup=False)


def _line(s: Suppression) -> str:
    """One suppression: id, when, channel, reason, then its evidence
    (provider, raw status, intent#attempt; `-` where none was kept)."""
    attempt = f"{s.intent_id}#{s.attempt_n}" if s.intent_id else "-"
    line = (
        f"{s.id}  {s.created_at:%Y-%m-%d %H:%M:%S}  {s.channel:5}  {s.reason:11}  "
        f"{s.provider or '-'}  {s.raw_status or '-'}  {attempt}  {s.destination_hash}"
    )
    if s.lifted_at is not None:
        line += f"  lifted {s.lifted_at:%Y-%m-%d %H:%M:%S} by {s.lifted_by}: {s.lift_reason}"
    return line
