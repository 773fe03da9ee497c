from __future__ import annotations

from tidings.domain.rollout import Cohort, cohort_bucket


def test_a_recipients_bucket_is_stable_and_spread() -> None:
    buckets = [cohort_bucket("acme", f"member-{n}") for n in range(2000)]
    assert buckets == [cohort_bucket("acme", f"member-{n}") for n in range(2000)]
    assert set(buckets) == set(range(100))
    assert 150 <= sum(b < 10 for b in buckets) <= 250  # about a tenth


def test_a_recipient_live_at_a_percent_is_live_at_any_larger_one() -> None:
    for bucket in range(100):
        lives = [Cohort(bucket, p).live for p in range(101)]
        assert lives == sorted(lives)  # False... then True: never back
        assert Cohort(bucket, 0).live is False and Cohort(bucket, 100).live is True
