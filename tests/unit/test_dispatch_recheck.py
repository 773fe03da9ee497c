"""The read before each provider call: grouped, and never older than the
question it answers."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.dispatch.recheck import GroupCheck, ReadFailed, Verdict


class Ledger:
    """The committed state a read sees: which keys are still ours."""

    def __init__(self) -> None:
        self.ours: set[str] = set()
        self.reads: list[list[str]] = []
        self.reading = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.fail = False

    def read(self, items: Sequence[str]) -> dict[Hashable, Verdict]:
        self.reads.append(list(items))
        self.reading.set()
        assert self.release.wait(5)
        if self.fail:
            raise RuntimeError("database unavailable")
        return {k: Verdict.GO if k in self.ours else Verdict.WITHDRAWN for k in items}


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def check(ledger: Ledger, fresh: float = 0.0, ticks: Ticks | None = None) -> GroupCheck[str]:
    return GroupCheck(ledger.read, lambda k: k, fresh, ticks or Ticks())


def test_an_answer_comes_from_a_read_that_began_after_the_question() -> None:
    ledger = Ledger()
    ledger.ours = {"a", "b"}
    group = check(ledger)
    assert group.verdict("a") is Verdict.GO
    ledger.ours.discard("a")  # a cancel commits
    assert group.verdict("a") is Verdict.WITHDRAWN
    assert group.verdict("b") is Verdict.GO
    assert ledger.reads == [["a"], ["a"], ["b"]]


def test_questions_asked_during_a_read_share_the_next_one() -> None:
    ledger = Ledger()
    ledger.ours = {"a", "b", "c"}
    group = check(ledger)
    ledger.release.clear()
    answers: dict[str, Verdict] = {}

    def ask(key: str) -> None:
        answers[key] = group.verdict(key)

    first = threading.Thread(target=ask, args=("a",))
    first.start()
    assert ledger.reading.wait(5)  # the read for "a" is under way
    ledger.ours.discard("c")  # a cancel commits during it
    later = [threading.Thread(target=ask, args=(k,)) for k in ("b", "c")]
    for thread in later:
        thread.start()
    while len(group._asked) < 2:  # both wait for the read under way to end
        threading.Event().wait(0.001)
    ledger.release.set()
    for thread in [first, *later]:
        thread.join(5)
    assert answers == {"a": Verdict.GO, "b": Verdict.GO, "c": Verdict.WITHDRAWN}
    assert ledger.reads[0] == ["a"]
    assert sorted(ledger.reads[1]) == ["b", "c"]  # one read for both
    assert len(ledger.reads) == 2


def test_a_failed_read_lets_no_call_through_and_the_next_question_reads_again() -> None:
    ledger = Ledger()
    ledger.ours = {"a"}
    group = check(ledger)
    ledger.fail = True
    with pytest.raises(ReadFailed):
        group.verdict("a")
    ledger.fail = False
    assert group.verdict("a") is Verdict.GO
    assert ledger.reads == [["a"], ["a"]]


def claimed(keys: str) -> tuple[Ledger, Ticks, GroupCheck[str]]:
    """Claims of `keys`, all still ours, read by their claim just now; reads
    stand for 50 ms."""
    ledger = Ledger()
    ledger.ours = set(keys)
    ticks = Ticks()
    group = check(ledger, fresh=0.05, ticks=ticks)
    group.claimed(list(keys), read_at=ticks.now)
    return ledger, ticks, group


def test_a_claim_read_younger_than_fresh_needs_no_other() -> None:
    ledger, ticks, group = claimed("ab")
    ticks.now += 0.04
    assert group.verdict("a") is Verdict.GO
    assert ledger.reads == []
    ticks.now += 0.02  # "b" was claimed 60 ms ago
    assert group.verdict("b") is Verdict.GO
    assert ledger.reads == [["b"]]


def test_a_read_refreshes_every_claim_still_waiting_for_its_call() -> None:
    ledger, ticks, group = claimed("abc")
    ticks.now += 0.06
    ledger.ours.discard("c")  # canceled after the claim
    assert group.verdict("a") is Verdict.GO
    assert sorted(ledger.reads[0]) == ["a", "b", "c"]
    ticks.now += 0.03  # the read began 30 ms ago: it stands for "b"
    assert group.verdict("b") is Verdict.GO
    assert group.verdict("c") is Verdict.WITHDRAWN
    assert len(ledger.reads) == 1
    group.forget(["a", "b", "c"])
    assert group._waiting == {} and group._answers == {}


def test_a_forgotten_claim_leaves_nothing_behind() -> None:
    ledger, ticks, group = claimed("ab")
    ticks.now += 1.0
    ledger.ours.discard("b")
    assert group.verdict("a") is Verdict.GO  # the read found "b" withdrawn too
    group.forget(["b"])  # recorded or handed back without a call
    assert group._waiting == {} and group._answers == {}


@settings(max_examples=25, deadline=None)
@given(
    keys=st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=24),
    withdrawn=st.sets(st.sampled_from("abcdefgh")),
    threads=st.integers(1, 6),
)
def test_concurrent_questions_each_get_their_own_answer(
    keys: list[str], withdrawn: set[str], threads: int
) -> None:
    """However the questions interleave, each gets the verdict for its own
    key, every question is in some read, and no read answers a key twice."""
    ledger = Ledger()
    ledger.ours = set("abcdefgh") - withdrawn
    group = check(ledger)
    answers: list[tuple[str, Verdict]] = []
    lock = threading.Lock()
    # A key is asked about by one thread at a time, as a claim is.
    per_thread = [sorted(set(keys))[i::threads] for i in range(threads)]

    def ask(mine: list[str]) -> None:
        for key in mine:
            found = group.verdict(key)
            with lock:
                answers.append((key, found))

    workers = [threading.Thread(target=ask, args=(mine,)) for mine in per_thread]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(10)
    assert sorted(answers) == sorted(
        (k, Verdict.WITHDRAWN if k in withdrawn else Verdict.GO) for k in set(keys)
    )
    assert sorted(k for read in ledger.reads for k in read) == sorted(set(keys))
    assert group._answers == {} and group._asked == {}
