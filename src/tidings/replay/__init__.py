"""Shadow replay: recorded decisions checked against the pure domain.

Before dispatch is enabled for a region or purpose, operators replay
fixtures: each case is a policy, the facts of one decision, and optionally
the lifecycle events that followed it. The replay runs `evaluate`, takes
the claim's verdict for the decision from domain/claiming.py (the function
the workers' claim calls), then pushes the events through the transition
table the way the ledger applies them, and compares the outcome with what
the fixture expects. No database, no provider, no clock: everything comes
from the fixture, so a run is reproducible and safe anywhere. See
docs/replay.md.

- `model`: a case, its steps and the names fixtures may use;
- `fixtures`: reading fixture files strictly into cases;
- `events`: replaying lifecycle events on one intent;
- `run`: running cases, the report, and `tidings replay`.
"""

from tidings.replay.events import Replayed, TraceEntry, replay_events
from tidings.replay.fixtures import FixtureError, load_file, load_fixtures
from tidings.replay.model import ACTIONS, CODES, EFFECTS, EVENT_NAMES, UNDELIVERED, Case, Step
from tidings.replay.run import (
    EXIT_DIFFERENCES,
    EXIT_INVALID,
    EXIT_OK,
    CaseResult,
    Difference,
    Report,
    replay,
    replay_command,
    run_case,
    shipped_fixtures,
)

__all__ = [
    "ACTIONS",
    "CODES",
    "EFFECTS",
    "EVENT_NAMES",
    "EXIT_DIFFERENCES",
    "EXIT_INVALID",
    "EXIT_OK",
    "UNDELIVERED",
    "Case",
    "CaseResult",
    "Difference",
    "FixtureError",
    "Replayed",
    "Report",
    "Step",
    "TraceEntry",
    "load_file",
    "load_fixtures",
    "replay",
    "replay_command",
    "replay_events",
    "run_case",
    "shipped_fixtures",
]
