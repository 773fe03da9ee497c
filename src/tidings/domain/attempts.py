"""From which states each recorded fact may move an attempt.

The attempts store (store/attempts.py) writes with these, and the shadow
replay (tidings/replay) applies them, so both judge a late or repeated
fact alike.
"""

from __future__ import annotations

from typing import Final

from tidings.domain.states import AttemptState

# The provider took the call: its own answer, or a lookup or receipt
# saying so, also after a recovered lease marked the outcome unknown. (The
# acceptance queries in store/sql/queries/attempts.sql spell these out.)
ACCEPTS_FROM: Final = frozenset({AttemptState.SENDING, AttemptState.UNKNOWN})

# The worker records its own call's outcome (a rejection, a deferral, a
# message it could not prepare, an ambiguous answer) only while it still
# holds the attempt. Not from `unknown`: then the lease was recovered and
# reconciliation owns the attempt; a late answer settling it would strand
# the intent.
WORKER_SETTLES_FROM: Final = frozenset({AttemptState.SENDING})

# A lookup proved the provider never received the call.
NOT_RECEIVED_FROM: Final = frozenset({AttemptState.UNKNOWN})

# Attempts whose outcome is still open: a receipt or an exhausted check
# budget may settle them.
STILL_OPEN: Final = frozenset({AttemptState.SENDING, AttemptState.UNKNOWN, AttemptState.ACCEPTED})
