"""The bounded reliability run CI does on every change: one minute of kills,
restarts, terminated connections, provider storms, webhook replays, floods
and cancellations against real processes, then every invariant.

The long version is `python -m harness.reliability --minutes N`
(docs/reliability.md). Both write their report under
harness/reliability/reports/.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from harness.reliability import report
from harness.reliability.run import RunConfig, RunReport, run

# One minute of faults, then recovery and checks: about two minutes in all.
CHAOS_MINUTES = 1.0
# A real provider's capabilities, never `ideal`'s lookup by our key. CI runs
# one profile per pass (.ci/run); `python -m harness.reliability --profile`
# runs any (docs/reliability.md has the figures of each).
PROFILE = os.environ.get("TIDINGS_RELIABILITY_PROFILE", "twilio")


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> RunReport:
    config = RunConfig(
        minutes=CHAOS_MINUTES,
        seed=11,
        workers=2,
        profile=PROFILE,
        server_url=None,  # a private server: its restarts disturb no other test
        flood_size=250,
        job_size=40,
        drain_timeout_s=90.0,
        settle_timeout_s=60.0,
        log_dir=tmp_path_factory.mktemp("reliability-logs"),
    )
    result = run(config)
    report.write(result, config.report_dir)
    return result


@pytest.mark.timeout(280)
def test_no_invariant_is_violated_under_faults(bounded: RunReport) -> None:
    broken = {
        name: result["examples"]
        for name, result in bounded.invariants.items()
        if result["violations"]
    }
    detail = json.dumps({"violations": broken, "evidence": bounded.evidence}, default=str)
    assert not broken, (
        f"invariants violated under the {PROFILE} profile (logs in {bounded.logs}): {detail[:6000]}"
    )


def test_every_fault_kind_was_injected_or_skipped_with_a_reason(bounded: RunReport) -> None:
    by_kind = bounded.faults["by_kind"]
    for kind in (
        "worker_sigkill",
        "worker_fault_point",
        "worker_sigterm",
        "pg_terminate_backends",
        "provider_storm",
        "webhook_replay",
        "flood",
        "bulk_job",
        "hostile_policy",
        "hostile_round",
    ):
        assert by_kind.get(kind, {}).get("done", 0) >= 1, (kind, by_kind)
    restarts = [r for r in bounded.faults["records"] if r["kind"] == "pg_restart"]
    assert restarts and all(r["outcome"] == "done" or r["reason"] for r in restarts)
    assert not [r for r in bounded.faults["records"] if r["outcome"] == "failed"]


def test_the_run_processed_real_work_and_every_worker_recovered(bounded: RunReport) -> None:
    processed = bounded.processed
    assert processed["intents"] >= 500
    assert processed["provider_requests"].get("accepted", 0) >= 300
    assert processed["lease_recoveries"] >= 1  # killed workers' sends were reconciled
    assert processed["cancels_committed"] >= 1 and processed["deadline_expiries"] >= 1
    assert bounded.probes and all(not p["failures"] for p in bounded.probes)
    assert Path(bounded.logs).is_dir()
