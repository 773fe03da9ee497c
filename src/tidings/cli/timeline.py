"""How `tidings timeline` prints an intent: a summary line and a table of
its entries, with each decision's inputs on one line."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from tidings.domain.intent import Intent, TimelineEntry
from tidings.domain.state_words import state_note


def intent_summary(intent: Intent) -> str:
    return (
        f"[bold]{intent.id}[/] {intent.channel} [bold]{intent.state}[/] v{intent.version}  "
        f"key={intent.idempotency_key}  policy={intent.policy_version}  "
        f"template={intent.template_name}@{intent.template_revision}  "
        f"correlation={intent.correlation_id or '-'}"
        + (f"\n[bold]{escape(note)}[/]" if (note := state_note(intent)) else "")
    )


def describe_inputs(inputs: dict[str, Any]) -> str:
    """A decision's inputs on one line: consent, zone, caps, blocks."""
    consent = inputs.get("consent", {})
    zone = inputs.get("timezone", {})
    parts = [
        f"consent={consent.get('evidence_ref') or consent.get('evidence_id') or 'none'}"
        + (" (required)" if consent.get("required") else ""),
        f"timezone={zone.get('zone') or ','.join(zone.get('candidates', [])) or 'unknown'}"
        f" ({zone.get('source', 'unknown')})",
    ]
    caps = inputs.get("frequency_caps") or {}
    parts += [f"cap {cap}={count}" for cap, count in caps.items()]
    blocks = inputs.get("blocks", {})
    parts += [name for name in ("opted_out", "suppressed") if blocks.get(name)]
    return ", ".join(parts)


def timeline_table(entries: list[TimelineEntry]) -> Table:
    table = Table(show_lines=False)
    for column in ("at", "kind", "from", "to", "event", "actor", "policy", "detail"):
        table.add_column(column)
    for e in entries:
        detail = ", ".join(f"{k}={v}" for k, v in e.detail.items() if k != "input")
        inputs = e.detail.get("input", {}).get("decision_inputs")
        if inputs:
            detail = "; ".join(filter(None, (detail, describe_inputs(inputs))))
        table.add_row(
            e.at.isoformat(timespec="milliseconds"),
            e.kind,
            e.from_state or "",
            e.to_state or "",
            e.event,
            e.actor,
            e.policy_version or "",
            detail,
        )
    return table
