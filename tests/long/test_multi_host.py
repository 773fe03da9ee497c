"""Many hosts (issue #26): two API hosts and three worker hosts, each its
own network namespace on this machine (harness/netns.py), against a
private PostgreSQL and the simulator on the bridge. A bulk job and a
stream of single intents; worker host 2 cut off mid-run, then killed; a
new worker host added. Nothing lost, nothing sent twice, every intent
final, and no host-local state matters: a kill switch, a rate limit, a
provider's pause and a console session hold across hosts.

One run (harness/hosts/run.py) for the module, bounded for CI; each test
asserts one of its checks (harness/hosts/checks.py). `python -m
harness.reliability --hosts --recipients 100000` is its long version.
"""

from __future__ import annotations

import pytest
from harness.hosts import checks
from harness.hosts.run import HostsConfig, HostsResult, run
from harness.netns import require_root

pytestmark = [
    pytest.mark.multi_host,
    pytest.mark.timeout(420),
]


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> HostsResult:
    require_root()
    return run(tmp_path_factory.mktemp("hosts"), HostsConfig(recipients=5_000, progress=print))


def test_every_intent_is_final_and_nothing_is_lost(result: HostsResult) -> None:
    assert not checks.every_intent_final(result)


def test_nothing_is_sent_twice(result: HostsResult) -> None:
    assert not checks.nothing_sent_twice(result)


def test_the_jobs_counts_equal_its_audience(result: HostsResult) -> None:
    assert not checks.job_counts_equal_audience(result)


def test_the_cut_off_host_is_recovered_from_and_the_added_one_takes_part(
    result: HostsResult,
) -> None:
    assert not checks.cut_host_replaced(result)


def test_a_kill_switch_turned_on_through_one_api_host_holds_every_worker_host(
    result: HostsResult,
) -> None:
    assert not checks.kill_switch_holds_every_host(result)


def test_the_policy_rate_limit_holds_across_worker_hosts(result: HostsResult) -> None:
    assert not checks.rate_limit_holds_across_hosts(result)


def test_a_providers_pause_holds_every_host_even_one_added_during_it(
    result: HostsResult,
) -> None:
    assert not checks.provider_pause_holds_every_host(result)


def test_a_console_session_from_one_api_host_works_on_the_other(result: HostsResult) -> None:
    assert not checks.console_session_crosses_api_hosts(result)


def test_the_run_measured_every_worker_host(result: HostsResult) -> None:
    """The figures docs/scaling.md reports, printed for the CI log."""
    print(result.seconds, result.figures, sep="\n")
    assert len(result.figures["worker_host_intents_per_s_before_cut"]) == 3
