"""What an intent's state leaves out, said plainly.

A cancel cannot unsend (seed 000's transition table): an intent canceled,
expired or failed after one of its messages was handed to a provider ends
in that state while the message went out. The state alone reads as
"nothing was sent"; the API, the CLI and the console add this sentence.
"""

from __future__ import annotations

from tidings.domain.intent import Intent
from tidings.domain.states import AttemptState, IntentState

# The final states that say nothing of a message that may already be out.
_QUIET_ABOUT_SENDING = frozenset({IntentState.CANCELED, IntentState.EXPIRED, IntentState.FAILED})

# What an attempt's state says happened to its message, strongest first.
_WENT_OUT: tuple[tuple[AttemptState, str], ...] = (
    (AttemptState.DELIVERED, "was delivered"),
    (AttemptState.ACCEPTED, "was accepted by the provider"),
    (AttemptState.UNKNOWN, "may have been sent (the provider's answer is unknown)"),
    (AttemptState.SENDING, "may have been sent (its call's outcome is not known yet)"),
)


def state_note(intent: Intent) -> str | None:
    """The sentence the state needs beside it, or None when it says it all.

    Reads the intent's attempts: None when they were not loaded."""
    if intent.state not in _QUIET_ABOUT_SENDING:
        return None
    # An attempt still `sending` whose call never started sent nothing.
    seen = {
        a.state
        for a in intent.attempts
        if a.state is not AttemptState.SENDING or a.call_started_at is not None
    }
    for state, words in _WENT_OUT:
        if state in seen:
            plain = f"{intent.state.value} after the message {words}"
            if intent.state is IntentState.CANCELED:
                return f"{plain}: a cancel cannot unsend it"
            return plain
    return None
