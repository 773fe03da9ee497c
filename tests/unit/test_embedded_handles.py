"""The embedded server's handle list and who lets go of it (store/embedded.py);
dead and zombie pids dropped from it: tests/e2e/test_embedded_stop.py."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tidings.store import embedded


def test_prune_without_a_handle_list_creates_none(tmp_path: Path) -> None:
    embedded._prune(tmp_path)
    assert not (tmp_path / embedded.HANDLES).exists()


def test_a_stop_signal_during_the_join_is_delivered_after_it() -> None:
    got: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda sig, _: got.append(sig))
    try:
        with embedded._signals_deferred():
            signal.raise_signal(signal.SIGTERM)
            assert got == []
        assert got == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_release_in_a_forked_child_lets_go_of_nothing(tmp_path: Path) -> None:
    """A process that did not join (a fork of one that did) holds nothing."""
    let_go: list[object] = []

    class Server:
        def _cleanup(self) -> None:
            let_go.append(self)

    held = embedded._Held(Server(), os.getpid() + 1)
    with embedded._lock:
        embedded._servers[tmp_path] = held
    try:
        embedded.release()
        assert let_go == [] and embedded._servers[tmp_path] is held
    finally:
        with embedded._lock:
            embedded._servers.pop(tmp_path)
