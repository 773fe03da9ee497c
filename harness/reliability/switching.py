"""Each channel's provider switched during the run (issue #43's soak).

Every switch moves each channel to the next provider whose own wire the
simulator speaks (harness/wires.py: Twilio and Vonage for SMS, Postmark and
SendGrid for e-mail, and whichever wires join them), as an operator moving
a channel to another provider would: the simulator is told to play the new
pair, new workers are started with the new `TIDINGS_<CHANNEL>_PROVIDER`, and
the old ones are retired (SIGTERM, or SIGKILL if they cannot take one).

Nothing is lost on the way: every process carries every wired provider's
settings, so attempts still in flight at the old provider are looked up
and their receipts verified by the old provider's adapter
(providers/accounts.py), and the simulator keeps each message its own
provider's (`SimulatorCore.send(played=)`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from harness.wires import WIRED
from tidings.providers.simulator.profiles import by_channel

from .faults import Injector, Schedule
from .processes import Fleet

KIND = "profile_switch"


def rotation(spec: str) -> Iterator[str]:
    """The specs to switch to, in turn, starting after `spec`: each channel
    moves to the next wired provider of that channel."""
    chosen = {channel: played.name for channel, played in by_channel(spec).items()}
    wired = {c: sorted(name for name, ch in WIRED.items() if ch == c) for c in chosen}
    while True:
        for channel, names in wired.items():
            if names:
                now = chosen[channel]
                chosen[channel] = names[(names.index(now) + 1) % len(names) if now in names else 0]
        yield f"sms={chosen['sms']},email={chosen['email']}"


def schedule_switches(schedule: Schedule, duration: float, phases: int) -> None:
    """`phases` equal spans (ten minutes each in the hour's soak), a switch
    between each two."""
    span = duration / phases
    schedule.events += [(k * span, KIND) for k in range(1, phases)]
    schedule.events.sort()


@dataclass
class Switcher:
    fleet: Fleet
    injector: Injector
    plan: Iterator[str]
    done: list[str] = field(default_factory=list)

    def switch(self) -> str:
        spec = next(self.plan)
        # Not the workers a fault is already stopping gracefully: killing one
        # mid-stop read as a stop that failed (the third hour's worker-271).
        old = list(self.injector.live())
        self.fleet.switch_profile(spec)
        for _ in old:  # the new ones first, as a rolling deploy does
            self.fleet.start_worker()
        retired = Counter(self.injector.retire(w) for w in old)
        self.done.append(spec)
        return f"now {spec}: {len(old)} workers replaced ({dict(retired)})"
