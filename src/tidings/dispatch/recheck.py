"""The committed state, read again right before each provider call.

Requirement R000.5 (docs/requirements.md): "Workers read that committed
state immediately before any external call." A claim moves an intent to
`sending`; a cancel, an expiry or a kill switch can commit after that and
before the call starts (the claim waits in the window for a send thread).
So a send thread calls only if a read that began at most `fresh_seconds`
before found the intent still `sending` at the claim's version under this
worker's lease, with no kill switch covering it. The claim is the first
such read.

Reads are grouped the way commits are: a thread that needs one while
another is under way waits for it to end, and the next read then serves
every thread that asked meanwhile, and refreshes every other claim still
waiting for its call. With `fresh_seconds` at 0 every call waits for a
read that began after it asked (shared with the calls that asked at the
same time); with 50 ms, one read in 50 ms serves a zero-latency provider's
whole window, instead of one read per call or two.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from enum import StrEnum
from typing import Generic, TypeVar

Item = TypeVar("Item")


class Verdict(StrEnum):
    GO = "go"  # still ours: call
    WITHDRAWN = "withdrawn"  # the intent moved (canceled, expired, recovered): never call
    KILLED = "killed"  # a kill switch covers it now: hand it back, call later
    EXPIRED = "expired"  # its deadline passed while it waited: hand it back to be expired


class ReadFailed(Exception):
    """The read serving this thread failed: the call must not start."""


class GroupCheck(Generic[Item]):
    """Answer "may I call?" for claims, reading the database as seldom as
    answers no older than `fresh_seconds` allow. `read` gets items and
    returns a verdict for each one's key (a key it leaves out is withdrawn).
    """

    def __init__(
        self,
        read: Callable[[Sequence[Item]], dict[Hashable, Verdict]],
        key: Callable[[Item], Hashable],
        fresh_seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._key = key
        self._fresh = fresh_seconds
        self._now = monotonic
        self._changed = threading.Condition()
        self._waiting: dict[Hashable, tuple[Item, float]] = {}  # claims not yet called
        self._asked: dict[Hashable, Item] = {}
        self._answers: dict[Hashable, Verdict | BaseException] = {}
        self._reading = False

    def claimed(self, items: Iterable[Item], read_at: float) -> None:
        """Claims whose claim read began at `read_at` (on `monotonic`)."""
        with self._changed:
            for item in items:
                self._waiting[self._key(item)] = (item, read_at)

    def forget(self, items: Iterable[Item]) -> None:
        """Claims recorded or handed back: no call will ask about them."""
        with self._changed:
            for item in items:
                key = self._key(item)
                self._waiting.pop(key, None)
                self._answers.pop(key, None)

    def verdict(self, item: Item) -> Verdict:
        key = self._key(item)
        with self._changed:
            known = self._waiting.pop(key, None)
            if key in self._answers:
                return _answer(self._answers.pop(key))
            if known is not None and self._now() - known[1] < self._fresh:
                return Verdict.GO
            self._asked[key] = item
            while key not in self._answers and self._reading:
                self._changed.wait()
            if key in self._answers:
                return _answer(self._answers.pop(key))
            asked, self._asked = self._asked, {}
            # The other claims still waiting ride along: their calls then
            # find a fresh answer instead of a read of their own.
            riding = {k: v[0] for k, v in self._waiting.items() if k not in asked}
            self._reading = True
            started = self._now()
        answers: dict[Hashable, Verdict | BaseException] = {}
        try:
            answers = dict(self._read([*asked.values(), *riding.values()]))
        except BaseException as exc:
            answers = {k: exc for k in asked}
        finally:
            # The answers land before the next reader may start: a waiter
            # whose question this read took must find its answer, not read
            # again without it.
            with self._changed:
                for k in asked:
                    if k != key:
                        self._answers[k] = answers.get(k, Verdict.WITHDRAWN)
                for k, other in riding.items():
                    if k not in self._waiting or k not in answers:
                        continue  # called or forgotten meanwhile, or the read failed
                    if answers[k] is Verdict.GO:
                        self._waiting[k] = (other, started)
                    else:
                        del self._waiting[k]
                        self._answers[k] = answers[k]
                self._reading = False
                self._changed.notify_all()
        return _answer(answers.get(key, Verdict.WITHDRAWN))


def _answer(found: Verdict | BaseException) -> Verdict:
    if isinstance(found, Exception):
        raise ReadFailed(str(found)) from found
    if isinstance(found, BaseException):
        raise found
    return found
