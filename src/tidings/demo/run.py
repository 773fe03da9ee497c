"""Running the demo: start the stack, play the scenarios, wait for every
intent to settle, then show what happened and prove what did not."""

from __future__ import annotations

import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

import httpx
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tidings.cli.devstack import DevStack
from tidings.demo import content, scenarios
from tidings.demo.scenarios import Scenario
from tidings.dispatch.steps import WorkerConfig
from tidings.domain.states import TERMINAL_INTENT
from tidings.platform.logging import configure_logging
from tidings.platform.private_files import make_private_dir, open_private_append
from tidings.platform.settings import Settings
from tidings.store import contacts
from tidings.store import demo as demo_reads

DETAIL_KEYS = ("code", "n", "provider_message_id", "raw_status", "effect", "version")
SETTLE_TIMEOUT = 150.0
# Ledger outcomes where the provider took the message (a 429 took nothing).
SENT = {"accepted", "timeout_after_accept"}
SIMULATOR = {"seed": 7, "receipt_delay_ms": 400, "duplicate_rate": 0.25, "reorder": True}


def run_demo(console: Console, settings: Settings | None = None) -> int:
    settings = settings or Settings()
    home = settings.resolved_home()
    make_private_dir(home)
    console = Console(width=max(console.width, 132), force_terminal=console.is_terminal)
    # Left open for the life of the process: the embedded database logs its
    # own shutdown at exit, after this function returns. 0600: a log is
    # where a key or a minted link would end up if anything went wrong.
    log_file = open_log(home)
    configure_logging(stream=log_file)
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    console.print(f"logs: {home / 'demo.log'}")
    return _run(console, settings, home)


def open_log(home: Path) -> TextIO:
    """`demo.log` under `home`, owner-only (0600) even if it existed wider."""
    make_private_dir(home)
    return open_private_append(home / "demo.log")


def _run(console: Console, settings: Settings, home: Path) -> int:
    config = WorkerConfig(maintenance_interval=0.25, idle_wait=0.25, seed=7)
    stack = DevStack(settings, simulator_config=SIMULATOR, worker_config=config)
    stack.start(with_worker=False)
    try:
        console.print(
            f"API {stack.api_url}  console {stack.api_url}/console  simulator {stack.simulator_url}"
        )
        content.publish(stack.tidings)
        key = stack.dev_key()
        played = _play(stack, key, home)
        minted = played.pop()
        _settle(console, stack, played)
        _summary(console, stack, played)
        _featured(console, stack, played[0])
        leaks = _scan_for_tokens(stack, minted) + _scan_log(home / "demo.log", minted)
        console.print(f"tokens minted: {len(minted)}; found in the database or logs: {leaks}")
        return 0 if leaks == 0 else 1
    finally:
        stack.stop()


def _scan_log(path: Path, minted: list[str]) -> int:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return sum(1 for token in minted if token in text)


def _play(stack: DevStack, key: str, home: Path) -> list[Any]:
    waitlist = scenarios.waitlist(stack, key)
    report = scenarios.report(stack, key, home)
    reset, minted = scenarios.reset(stack, key)
    return [waitlist, report, reset, minted]


def _settle(console: Console, stack: DevStack, played: list[Scenario]) -> None:
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
    )
    deadline = time.monotonic() + SETTLE_TIMEOUT
    with Progress(*columns, console=console, transient=False) as progress:
        tasks = {s.name: progress.add_task(s.name, total=1) for s in played}
        while time.monotonic() < deadline:
            states = {s.name: _states(stack, s) for s in played}
            for name, counts in states.items():
                total = sum(counts.values()) or 1
                done = sum(n for st, n in counts.items() if st in TERMINAL_INTENT)
                progress.update(tasks[name], total=total, completed=done)
            if all(_settled(c) for c in states.values()):
                return
            time.sleep(0.25)  # watching real processes work, not waiting on a clock


def _settled(counts: Counter[str]) -> bool:
    return bool(counts) and all(state in TERMINAL_INTENT for state in counts)


def _rows(stack: DevStack, s: Scenario) -> list[dict[str, Any]]:
    with stack.tidings.db.transaction() as conn:
        return demo_reads.scenario_intents(conn, stack.tidings.tenant, s.job_id, s.intent_ids)


def _states(stack: DevStack, s: Scenario) -> Counter[str]:
    return Counter(r["state"] for r in _rows(stack, s))


def _codes(stack: DevStack, s: Scenario) -> Counter[str]:
    return Counter(r["decision_code"] or "-" for r in _rows(stack, s))


def _summary(console: Console, stack: DevStack, played: list[Scenario]) -> None:
    ledger = httpx.get(f"{stack.simulator_url}/_ledger", timeout=10).json()
    receipts = httpx.get(f"{stack.simulator_url}/_receipts", timeout=10).json()
    table = Table(title="What happened")
    for column in (
        "scenario",
        "intents by state",
        "codes",
        "messages sent",
        "duplicates prevented",
    ):
        table.add_column(column)
    for s in played:
        keys = _attempt_keys(stack, s)
        sends = sum(1 for e in ledger if e["idempotency_key"] in keys and e["outcome"] in SENT)
        dupes = s.replays + sum(
            1 for r in receipts if r.get("duplicate") and r.get("idempotency_key") in keys
        )
        table.add_row(
            s.name, _fmt(_states(stack, s)), _fmt(_codes(stack, s)), str(sends), str(dupes)
        )
    console.print(table)
    _receipt_blocks(console, stack)
    for s in played:
        for note in s.notes:
            console.print(f"[dim]{s.name}: {note}[/]")


def _receipt_blocks(console: Console, stack: DevStack) -> None:
    """What the providers' receipts taught: addresses no later send reaches."""
    with stack.tidings.db.transaction() as conn:
        rows = contacts.receipt_blocks(conn, stack.tidings.tenant)
    found = ", ".join(f"{r['kind']} {r['count']} ({r['provider']})" for r in rows) or "none"
    console.print(f"suppressions caused by receipts: {found}")


def _attempt_keys(stack: DevStack, s: Scenario) -> set[str]:
    return {key for r in _rows(stack, s) for key in r["keys"]}


def _fmt(counts: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def _featured(console: Console, stack: DevStack, s: Scenario) -> None:
    if s.featured is None:
        return
    intent = stack.tidings.get(s.featured)
    console.print(
        f"\n[bold]Timeline of {intent.idempotency_key}[/] ({intent.state}, "
        f"cancel reason {intent.cancel_reason}, policy {intent.policy_version})"
    )
    for e in stack.tidings.timeline(s.featured):
        detail = ", ".join(f"{k}={v}" for k, v in e.detail.items() if k in DETAIL_KEYS)
        move = f"{e.from_state or ''} -> {e.to_state}" if e.kind == "transition" else e.to_state
        console.print(
            f"  {e.at:%H:%M:%S.%f}"[:-3] + f"  {e.kind:<11} {move:<22} {e.event:<18} "
            f"{e.actor:<24} {detail}"
        )


def _scan_for_tokens(stack: DevStack, minted: list[str]) -> int:
    if not minted:
        return 0
    with stack.tidings.db.transaction() as conn:
        dumps = demo_reads.ledger_text(conn)
    return sum(1 for dump in dumps for token in minted if token in dump)
