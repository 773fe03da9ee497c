"""`tidings keys create|list|revoke`: API keys, for operators with database access.

The key itself is printed once, by `create`, as the last word; `list`
shows ids, names, scopes and state, never a key.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:
    from tidings.client import Tidings

keys_app = typer.Typer(help="API keys: create, list, revoke.", no_args_is_help=True)
console = Console()
errors = Console(stderr=True)
_DURATION = re.compile(r"^\s*(\d{1,9})\s*([smhdw]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """`90d`, `12h`, `30m`, `3600s` or `3600` (seconds)."""
    found = _DURATION.match(text.lower())
    if found is None:
        raise typer.BadParameter(f"{text!r}: use a number with s, m, h, d or w (e.g. 90d)")
    seconds = int(found.group(1)) * _UNIT_SECONDS[found.group(2)]
    if seconds <= 0:
        raise typer.BadParameter("the duration must be positive")
    return timedelta(seconds=seconds)


def parse_instant(text: str) -> datetime:
    """An ISO 8601 instant with a timezone (`2027-01-31T00:00:00Z`)."""
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not an ISO 8601 date and time") from None
    if when.tzinfo is None:
        raise typer.BadParameter("give a timezone offset, e.g. 2027-01-31T00:00:00Z")
    return when


def _tidings(tenant: str | None = None) -> Tidings:
    from tidings.cli.common import open_tidings

    return open_tidings(tenant)


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option(help="the tenant the key acts for")],
    scopes: Annotated[
        str, typer.Option(help="comma-separated: send,read,admin,webhook")
    ] = "send,read",
    name: Annotated[str, typer.Option(help="a label for the key")] = "cli",
    expires_in: Annotated[
        str | None, typer.Option(help="the key stops working after this long: 90d, 12h, 30m")
    ] = None,
    expires_at: Annotated[
        str | None, typer.Option(help="the key stops working at this instant (ISO 8601, with zone)")
    ] = None,
) -> None:
    """Create an API key; the key itself is the last word printed (shown once)."""
    from tidings.domain.errors import InvalidInput
    from tidings.store.api_keys import create_key

    if expires_in is not None and expires_at is not None:
        raise typer.BadParameter("give --expires-in or --expires-at, not both")
    with _tidings(tenant) as t:
        t.migrate()
        now = t.clock.now()
        until = parse_instant(expires_at) if expires_at is not None else None
        if expires_in is not None:
            until = now + parse_duration(expires_in)
        try:
            with t.db.transaction() as conn:
                key_id, plaintext = create_key(
                    conn, tenant, scopes.split(","), name, now=now, expires_at=until, vault=t.vault
                )
        except InvalidInput as exc:
            errors.print(f"error: {exc}", markup=False, highlight=False)
            raise typer.Exit(2) from None
    expiry = f", expiring {until.astimezone(UTC).isoformat()}" if until else ""
    console.print(
        f"key {key_id} for tenant {tenant} with scopes {scopes}{expiry}: {plaintext}",
        soft_wrap=True,
        markup=False,
        highlight=False,
    )


@keys_app.command("list")
def keys_list(
    tenant: Annotated[str | None, typer.Option(help="only this tenant's keys")] = None,
) -> None:
    """Every key (or one tenant's): id, name, scopes, state. Never the key itself."""
    from tidings.store.api_keys import list_keys, state_of

    with _tidings(tenant) as t:
        now = t.clock.now()
        with t.db.transaction() as conn:
            rows = list_keys(conn, tenant)
    header = ("tenant", "key id", "state", "scopes", "created", "expires", "revoked", "name")
    lines = [header] + [
        (
            row["tenant_id"],
            row["key_id"],
            state_of(row, now),
            ",".join(row["scopes"]),
            _when(row["created_at"]),
            _when(row["expires_at"]),
            _when(row["revoked_at"]),
            row["name"],
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        # Plain aligned text, never wrapped: ids are copied from here and grepped.
        text = "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        console.print(text.rstrip(), markup=False, highlight=False, soft_wrap=True)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="the key's id (the part after tdg_)")],
    tenant: Annotated[
        str | None, typer.Option(help="the key's tenant (needed only if two tenants share the id)")
    ] = None,
) -> None:
    """Revoke a key now, and every key it minted (and theirs); their console
    sessions end too. Exit 1 if no live key matched."""
    from tidings.store.api_keys import descendants, revoke, tenants_with_key

    with _tidings(tenant) as t, t.db.transaction() as conn:
        owners = [tenant] if tenant else tenants_with_key(conn, key_id)
        if len(owners) > 1:
            errors.print(f"key id {key_id} exists in tenants {', '.join(owners)}: add --tenant")
            raise typer.Exit(2)
        revoked = bool(owners) and revoke(conn, owners[0], key_id, now=t.clock.now())
        below = descendants(conn, owners[0], key_id) if revoked else []
    if not revoked:
        errors.print(f"no live key {key_id}" + (f" in tenant {tenant}" if tenant else ""))
        raise typer.Exit(1)
    minted = f", and the keys it minted: {', '.join(below)}" if below else ""
    console.print(
        f"revoked key {key_id} of tenant {owners[0]}{minted}", markup=False, highlight=False
    )


def _when(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ") if value else "—"
