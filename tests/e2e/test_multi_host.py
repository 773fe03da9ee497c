"""Many hosts (issue #26): two API hosts and three worker hosts, each its
own network namespace on this machine (tests/e2e/netns.py), against a
private PostgreSQL and the simulator on the bridge. A bulk job and a
stream of single intents; worker host 2 cut off mid-run, then killed; a
new worker host added. Nothing lost, nothing sent twice, every intent
final, and no host-local state matters: a kill switch, a rate limit, a
provider's pause and a console session hold across hosts.

The run itself is tests/e2e/hosts_run.py; `python -m tests.reliability
--hosts --recipients 100000` is its long version.
"""

from __future__ import annotations

import itertools
import math

import pytest

from .hosts_run import CUT, HostsConfig, HostsResult, run
from .netns import require_root

pytestmark = [pytest.mark.multi_host, pytest.mark.timeout(420)]


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> HostsResult:
    require_root()
    root = tmp_path_factory.mktemp("hosts")
    return run(root, HostsConfig(recipients=5_000, progress=print))


def test_every_intent_is_final_and_nothing_is_lost(result: HostsResult) -> None:
    states = result.states
    assert set(states) <= {"delivered", "canceled"}, states
    config = HostsConfig()
    total = 5_000 + len(result.stream_ids) + config.held + config.limited
    assert sum(states.values()) == total, (states, total)
    assert not result.stream_errors, result.stream_errors[:5]


def test_nothing_is_sent_twice(result: HostsResult) -> None:
    assert set(result.sends_per_key.values()) == {1}
    assert set(result.sends_per_intent.values()) == {1}
    # Every delivered intent was sent; a cancel may win after its call (it
    # stays canceled), so only those may have been sent without being delivered.
    assert result.delivered <= set(result.sends_per_intent)
    extra = set(result.sends_per_intent) - result.delivered
    assert len(extra) <= result.states["canceled"]


def test_the_jobs_counts_equal_its_audience(result: HostsResult) -> None:
    job = result.job
    assert job["audience_size"] == 5_000
    assert job["status"] == "complete", job
    assert sum(job["counts"].values()) == 5_000, job["counts"]
    assert job["counts"].get("delivered") == 5_000, job["counts"]


def test_the_cut_host_did_work_and_the_added_host_took_over(result: HostsResult) -> None:
    before = result.sent_by_host["before_cut"]
    assert {"worker-1", "worker-2", "worker-3"} <= {h for h, n in before.items() if n > 0}, before
    after = result.sent_by_host["after_pause"]
    assert after.get("worker-4", 0) > 0, after
    assert after.get(CUT, 0) == 0, after


def test_a_kill_switch_turned_on_through_one_api_host_holds_every_worker_host(
    result: HostsResult,
) -> None:
    assert result.held_sent_while_on == 0
    assert result.held_sent_after == HostsConfig().held  # and lifted, they go out


def test_the_policy_rate_limit_holds_across_worker_hosts(result: HostsResult) -> None:
    config = HostsConfig()
    times = result.limited_times
    assert len(times) == config.limited
    # Fixed windows admit up to twice the limit around a boundary, never more,
    # and so many sends need at least this many windows between them.
    window = config.rate_window_s
    busiest = max(sum(1 for t in times[i:] if t < start + window) for i, start in enumerate(times))
    assert busiest <= 2 * config.rate_limit, busiest
    windows = math.ceil(config.limited / config.rate_limit)
    assert times[-1] - times[0] >= (windows - 1) * window - 1, (times[0], times[-1])


def test_a_providers_pause_holds_every_host_the_added_one_too(result: HostsResult) -> None:
    config = HostsConfig()
    # The new host was up while the pause still ran: it would have called.
    assert result.added_ready_at < result.pause_start + config.retry_after_s - 2
    assert result.calls_during_pause == 0


def test_a_console_session_from_one_api_host_works_on_the_other(result: HostsResult) -> None:
    assert result.session_crossed


def test_figures(result: HostsResult) -> None:
    """Not a property: printed, so a CI log shows what this machine gave."""
    print(result.seconds)
    print(result.figures)
    assert list(itertools.chain(result.figures["worker_host_intents_per_s_before_cut"]))
