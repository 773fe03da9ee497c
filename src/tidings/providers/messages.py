"""What crosses the provider boundary: messages we send, webhook requests we
receive, and messages recipients send us."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

Channel = Literal["sms", "email"]


@dataclass(frozen=True)
class AttachmentRef:
    id: str
    revision: int
    filename: str
    content_type: str
    url_or_path: str


AttachmentLoader = Callable[[AttachmentRef], bytes]


@dataclass(frozen=True)
class OutboundMessage:
    channel: Channel
    # Destination and rendered body stay out of repr so they never reach a log.
    to: str = field(repr=False)
    body: str = field(repr=False)
    subject: str | None = field(default=None, repr=False)
    sender: str | None = None
    attachments: tuple[AttachmentRef, ...] = ()
    provider_template_id: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict, hash=False)
    validity_seconds: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))


class Headers(Mapping[str, str]):
    """Read-only header mapping with case-insensitive names, as HTTP defines them."""

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()):
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items = {name.lower(): value for name, value in pairs}

    def __getitem__(self, name: str) -> str:
        return self._items[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


@dataclass(frozen=True)
class InboundMessage:
    """A message a recipient sent us (a STOP, a START), verified."""

    sender: str = field(repr=False)
    text: str = field(repr=False)
    # The number it was sent to: one of our sender numbers (Twilio's `To`).
    # It says whose texts a STOP ends (domain/senders.py); None: not given.
    to: str | None = None


@dataclass(frozen=True)
class WebhookRequest:
    method: str
    url: str  # the full URL as received: some signatures cover it (Twilio)
    headers: Mapping[str, str] = field(default_factory=dict, hash=False)
    body: bytes = field(default=b"", repr=False)
    query: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "headers", Headers(self.headers))
        object.__setattr__(self, "query", MappingProxyType(dict(self.query)))
