"""The soak's retention purge of a month a year old (issue #43).

Once during the run, at a random moment and under every other fault, a
few hundred intents are made and canceled through the library on a clock
400 days back, past every clock of the shipped policy (docs/retention.md):
their ids, and so their evidence rows, belong to that month. Then `tidings
purge` runs, as an operator's timer would. Every worker also purges when
it starts (`purge_interval`), and the soak starts workers all the time, so
whichever purge comes first takes the month: the CLI's counts in the
fault's detail say whether it was the one. The purge must take that
month's intents and evidence and nothing of the run's own: the invariants
judge every intent the run made, and `check` proves the old ones gone.

The month is older than the run database's first evidence month, so its
rows sit in the default partitions and go row by row
(dispatch/retention.py), the path a purge takes for evidence written
before partitioning or kept when its month went.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg

from tidings import ManualClock, Tidings

from .workload import TEMPLATE, utcnow

AGE = timedelta(days=400)  # past the shipped policy's longest clock (recipient, 365)
SIZE = 300
PURGE_TIMEOUT_S = 300.0
EVIDENCE = ("attempts", "transitions", "events", "observations")


@dataclass
class OldMonth:
    db_url: str
    secret: str
    env: dict[str, str]  # a fleet process's environment: the CLI as deployed
    ids: list[str] = field(default_factory=list)
    purged: dict[str, Any] | None = None

    def seed(self) -> None:
        """SIZE intents made and canceled 400 days ago, each in the
        transaction that made it: the fleet is already running, and an
        intent committed pending would be claimed and sent (a send the
        purge then leaves without its attempt)."""
        clock = ManualClock(utcnow() - AGE)
        with Tidings(self.db_url, secret_key=self.secret, clock=clock) as old:
            for n in range(SIZE):
                with old.db.transaction() as conn:
                    intent = old.notify(
                        idempotency_key=f"old-month:{n}",
                        channel="email",
                        recipient={"ref": f"old-{n}", "email": f"old-{n}@example.com"},
                        template=TEMPLATE,
                        variables={"name": f"O{n}", "booking": f"OB{n}"},
                        purpose="transactional",
                        event_class="booking_notice",
                        conn=conn,
                    )
                    clock.advance(1)
                    old.cancel(intent.id, "member_left", conn=conn)
                self.ids.append(str(intent.id))

    def purge(self) -> str:
        """The old month made, then `tidings purge` as the operator's timer runs it."""
        self.seed()
        done = subprocess.run(
            [sys.executable, "-m", "tidings.cli", "purge"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=PURGE_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"tidings purge exited {done.returncode}: {done.stderr[-500:]}")
        output = " ".join(done.stdout.split())[-500:]
        self.purged = {"output": output}
        return output

    def check(self) -> list[str]:
        """Violations: an old intent, or evidence of one, left after the purge."""
        if self.purged is None or not self.ids:
            return []
        found = []
        with psycopg.connect(self.db_url) as conn:
            for table, column in [("intents", "id"), *((t, "intent_id") for t in EVIDENCE)]:
                row = conn.execute(
                    f"SELECT count(*) FROM {table} WHERE {column} = ANY(%s::uuid[])", [self.ids]
                ).fetchone()
                if row and row[0]:
                    found.append(f"{row[0]} {table} row(s) of the old month left by the purge")
        return found
