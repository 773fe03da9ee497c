"""`tidings policy list|show`: a tenant's policy versions from a shell
(`policy publish` is in cli/operations.py).

`list --json` prints what GET /v1/policies answers; `show` prints a
version's document as it was published, ready to edit and publish again.
"""

from __future__ import annotations

import json
from datetime import UTC
from typing import Annotated

import typer

from tidings.cli.templates import Json, Tenant, fail, say


def list_policies(tenant: Tenant = None, as_json: Json = False) -> None:
    """Published versions, newest first; the newest is current (new intents freeze it)."""
    from tidings.api.schemas.admin import PolicyList, PolicyOut
    from tidings.cli.common import open_tidings

    with open_tidings(tenant) as t:
        items = [PolicyOut(**r) for r in t.policy_versions()]
    listing = PolicyList(current=items[0].version if items else None, items=items)
    if as_json:
        print(json.dumps(listing.model_dump(mode="json"), indent=2))
        return
    if not items:
        say(f"no policy published in tenant {t.tenant}")
    for p in items:
        when = p.published_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        mark = "  current" if p.version == listing.current else ""
        say(f"{p.version}  {p.name}  published {when} by {p.published_by}{mark}")


def show(
    version: Annotated[
        str | None, typer.Argument(help="The version (default: the current one)")
    ] = None,
    tenant: Tenant = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="The same: the document is JSON either way")
    ] = False,
) -> None:
    """The document of the current version, or of VERSION, as it was published."""
    from tidings.cli.common import open_tidings
    from tidings.store.policies import document_of

    with open_tidings(tenant) as t:
        if version is None:
            newest = t.policy_versions()
            if not newest:
                fail(f"no policy published in tenant {t.tenant}")
            version = str(newest[0]["version"])
        with t.db.transaction() as conn:
            document = document_of(conn, t.tenant, version)
    if document is None:
        fail(f"no policy version {version} in tenant {t.tenant}; see `tidings policy list`")
    print(json.dumps(document, indent=2))  # plain: rich would wrap and colour it
