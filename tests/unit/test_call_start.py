"""The call-started mark before each provider call: one statement per group
of calls, never older than the call it lets through."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.dispatch.call_start import CallStarts, MarkFailed, Verdict


class Ledger:
    """The committed state a mark sees: which claims are still ours."""

    def __init__(self) -> None:
        self.ours: set[str] = set()
        self.marked: list[list[str]] = []
        self.marking = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.fail = False

    def mark(self, items: Sequence[str]) -> dict[Hashable, Verdict]:
        self.marked.append(list(items))
        self.marking.set()
        assert self.release.wait(5)
        if self.fail:
            raise RuntimeError("database unavailable")
        return {k: Verdict.GO if k in self.ours else Verdict.WITHDRAWN for k in items}


def starts(ledger: Ledger) -> CallStarts[str]:
    return CallStarts(ledger.mark, lambda k: k)


def test_every_call_has_a_mark_written_after_it_asked() -> None:
    ledger = Ledger()
    ledger.ours = {"a", "b"}
    gate = starts(ledger)
    assert gate.verdict("a") is Verdict.GO
    ledger.ours.discard("a")  # a cancel commits
    assert gate.verdict("a") is Verdict.WITHDRAWN
    assert gate.verdict("b") is Verdict.GO
    assert ledger.marked == [["a"], ["a"], ["b"]]


def test_calls_arriving_during_a_mark_share_the_next_statement() -> None:
    ledger = Ledger()
    ledger.ours = {"a", "b", "c"}
    gate = starts(ledger)
    ledger.release.clear()
    answers: dict[str, Verdict] = {}

    def ask(key: str) -> None:
        answers[key] = gate.verdict(key)

    first = threading.Thread(target=ask, args=("a",))
    first.start()
    assert ledger.marking.wait(5)  # the statement for "a" is under way
    ledger.ours.discard("c")  # a cancel commits during it
    later = [threading.Thread(target=ask, args=(k,)) for k in ("b", "c")]
    for thread in later:
        thread.start()
    while len(gate._asked) < 2:  # both wait for the statement under way to end
        threading.Event().wait(0.001)
    ledger.release.set()
    for thread in [first, *later]:
        thread.join(5)
    assert answers == {"a": Verdict.GO, "b": Verdict.GO, "c": Verdict.WITHDRAWN}
    assert ledger.marked[0] == ["a"]
    assert sorted(ledger.marked[1]) == ["b", "c"]  # one statement for both
    assert len(ledger.marked) == 2


def test_a_failed_mark_lets_no_call_through_and_the_next_call_marks_again() -> None:
    ledger = Ledger()
    ledger.ours = {"a"}
    gate = starts(ledger)
    ledger.fail = True
    with pytest.raises(MarkFailed):
        gate.verdict("a")
    ledger.fail = False
    assert gate.verdict("a") is Verdict.GO
    assert ledger.marked == [["a"], ["a"]]


def test_a_failed_group_fails_every_call_in_it() -> None:
    ledger = Ledger()
    ledger.ours = {"a", "b"}
    gate = starts(ledger)
    ledger.release.clear()
    failures: list[str] = []

    def ask(key: str) -> None:
        try:
            gate.verdict(key)
        except MarkFailed:
            failures.append(key)

    first = threading.Thread(target=ask, args=("a",))
    first.start()
    assert ledger.marking.wait(5)
    second = threading.Thread(target=ask, args=("b",))
    second.start()
    while len(gate._asked) < 1:
        threading.Event().wait(0.001)
    ledger.fail = True
    ledger.release.set()
    first.join(5)
    second.join(5)
    assert sorted(failures) == ["a", "b"]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=12, unique=True))
def test_concurrent_calls_each_get_exactly_their_own_verdict(keys: list[str]) -> None:
    ledger = Ledger()
    ledger.ours = {k for k in keys if k in "ace"}
    gate = starts(ledger)
    answers: dict[str, Verdict] = {}
    threads = [
        threading.Thread(target=lambda k=k: answers.update({k: gate.verdict(k)})) for k in keys
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert answers == {k: Verdict.GO if k in "ace" else Verdict.WITHDRAWN for k in keys}
    # Every call was marked exactly once, by a statement it was part of.
    assert sorted(k for group in ledger.marked for k in group) == sorted(keys)
    assert gate._asked == {} and gate._answers == {}
