"""The durable "call started" mark, written in groups right before calls go out.

DESIGN.md invariant 3: after a crash, a claim whose provider call never
started must be told apart from one whose call is under way. The first is
simply due again (nothing was sent); only the second has an unknown
outcome to reconcile. So no call starts before a committed mark says it
did, and lease recovery (dispatch/reconcile.py) reads the mark.

The statement that writes the mark is also the last read of the claim's
committed state before its call (R000.5 in docs/requirements.md): it marks
only a claim still `sending` at its version under this worker's lease with
no kill switch covering it, no opt-out or suppression of its
destination newer than the claim and no pause of its provider account, so
a cancel, a kill switch, a STOP, a suppression or another worker's 429
that committed since the claim stops the call.

Marks are grouped the way commits are: a send thread that reaches its call
while another thread's mark is being written waits for that one to end,
and the next statement marks every call that arrived meanwhile. So at most
the channel's send threads are ever marked and not yet called, each for
the time between the statement's commit and its request leaving, and a
fast provider's calls share statements instead of paying one each.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from enum import StrEnum
from typing import Generic, TypeVar

from tidings.store.attempts import MarkResult

Item = TypeVar("Item")


class Verdict(StrEnum):
    GO = "go"  # marked: call now
    WITHDRAWN = "withdrawn"  # the intent moved (canceled, expired, recovered): never call
    KILLED = "killed"  # a kill switch covers it now: hand it back, call later
    # An opt-out or suppression of its destination committed since the
    # claim: hand it back, so the gate decides on what is true now.
    STOPPED = "stopped"
    EXPIRED = "expired"  # its deadline passed while it waited: hand it back to be expired
    # Its provider account paused (or its tenant is held back on it) since
    # the claim, by any worker's answers: hand it back until the pause ends.
    PAUSED = "paused"


class MarkFailed(Exception):
    """The statement serving this call failed: the call must not start."""


class CallStarts(Generic[Item]):
    """Answer "may I call?" with a committed mark, one statement per group.

    `mark` gets the items of a group and returns a verdict for each one's
    key (a key it leaves out is withdrawn); it must commit before it returns.
    """

    def __init__(
        self,
        mark: Callable[[Sequence[Item]], dict[Hashable, Verdict]],
        key: Callable[[Item], Hashable],
    ) -> None:
        self._mark = mark
        self._key = key
        self._changed = threading.Condition()
        self._asked: dict[Hashable, Item] = {}
        self._answers: dict[Hashable, Verdict | BaseException] = {}
        self._marking = False

    def verdict(self, item: Item) -> Verdict:
        key = self._key(item)
        with self._changed:
            self._asked[key] = item
            while self._marking and key not in self._answers:
                self._changed.wait()
            if key in self._answers:
                return _answer(self._answers.pop(key))
            # No statement under way: this thread writes one for every call
            # that asked meanwhile, its own included.
            group, self._asked = self._asked, {}
            self._marking = True
        answers: dict[Hashable, Verdict | BaseException] = {}
        try:
            answers = dict(self._mark(list(group.values())))
        except BaseException as exc:
            answers = {k: exc for k in group}
        finally:
            # The answers land before the next statement may start: a
            # waiter whose call this one marked must find its answer.
            with self._changed:
                for k in group:
                    if k != key:
                        self._answers[k] = answers.get(k, Verdict.WITHDRAWN)
                self._marking = False
                self._changed.notify_all()
        return _answer(answers.get(key, Verdict.WITHDRAWN))


def _answer(found: Verdict | BaseException) -> Verdict:
    if isinstance(found, Exception):
        raise MarkFailed(str(found)) from found
    if isinstance(found, BaseException):
        raise found
    return found


def verdict_of(found: MarkResult | None) -> Verdict:
    """What the mark's read found for one call (None: its row is gone)."""
    if found is None or not found.held:
        return Verdict.WITHDRAWN
    if found.killed:
        return Verdict.KILLED
    if found.stopped:
        return Verdict.STOPPED
    if found.paused_until is not None:
        return Verdict.PAUSED
    return Verdict.GO if found.marked else Verdict.WITHDRAWN
