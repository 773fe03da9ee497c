"""Exact SMS segment counting (3GPP TS 23.038 / 23.040).

Segments drive spend limits and what the API reports, so the count must
match what a carrier bills, not an estimate:

- GSM-7: 160 septets fit one segment; a concatenated message carries 153
  per part (the user-data header takes the rest). Extension-table
  characters cost two septets (escape + code) and the pair is never split
  across parts, so a part may end one septet short.
- UCS-2: any character outside GSM-7 (basic + extension) turns the whole
  message into UTF-16: 70 units in one segment, 67 per concatenated part.
  A surrogate pair (emoji) costs two units and is never split.

We count what is sent: no "smart" transliteration (curly quotes stay
UCS-2). An empty text is one segment, because providers bill it as one.
Grapheme clusters (ZWJ emoji sequences, combining marks) may be split
across parts, as carriers do; only escape and surrogate pairs are atomic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Encoding = Literal["GSM-7", "UCS-2"]

# The default alphabet, without ESC (0x1B): a raw ESC in user text would be
# read by the handset as the start of an extension pair.
GSM7_BASIC: Final = frozenset(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
GSM7_EXTENSION: Final = frozenset("\f^{}\\[~]|€")
GSM7_ALPHABET: Final = GSM7_BASIC | GSM7_EXTENSION

GSM7_SINGLE: Final = 160
GSM7_PART: Final = 153
UCS2_SINGLE: Final = 70
UCS2_PART: Final = 67


@dataclass(frozen=True)
class SegmentCount:
    """How a text travels: encoding, total units and the per-part split.

    `units` are septets for GSM-7 and UTF-16 code units for UCS-2;
    `part_units` sums to `units` and has `segments` entries.
    """

    encoding: Encoding
    units: int
    segments: int
    part_units: tuple[int, ...]


def is_gsm7(text: str) -> bool:
    return GSM7_ALPHABET.issuperset(text)


def encoding_of(text: str) -> Encoding:
    return "GSM-7" if is_gsm7(text) else "UCS-2"


def unit_cost(ch: str, encoding: Encoding) -> int:
    """Units one character costs; 2 for an escape pair or a surrogate pair."""
    if encoding == "GSM-7":
        return 2 if ch in GSM7_EXTENSION else 1
    return 2 if ord(ch) > 0xFFFF else 1


def units_of(text: str, encoding: Encoding) -> int:
    """The sum of `unit_cost` over the text, counted by C loops: every send
    counts its message, and a Python loop per character was a tenth of a
    dispatch's time."""
    if encoding == "GSM-7":
        return len(text) + sum(text.count(ch) for ch in GSM7_EXTENSION)
    # UTF-16 code units; a lone surrogate passes as the one unit it costs.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def split_parts(text: str, encoding: Encoding) -> tuple[str, ...]:
    """The texts of each part, as a carrier would cut them."""
    single, part = (GSM7_SINGLE, GSM7_PART) if encoding == "GSM-7" else (UCS2_SINGLE, UCS2_PART)
    if units_of(text, encoding) <= single:
        return (text,)
    return _pack(text, encoding, part)


def _pack(text: str, encoding: Encoding, capacity: int) -> tuple[str, ...]:
    # Greedy is what carriers do: a pair that does not fit moves whole to
    # the next part, leaving one unit unused.
    parts: list[str] = []
    current: list[str] = []
    used = 0
    for ch in text:
        cost = unit_cost(ch, encoding)
        if used + cost > capacity:
            parts.append("".join(current))
            current, used = [], 0
        current.append(ch)
        used += cost
    parts.append("".join(current))
    return tuple(parts)


def count_segments(text: str) -> SegmentCount:
    encoding = encoding_of(text)
    part_units = tuple(units_of(p, encoding) for p in split_parts(text, encoding))
    return SegmentCount(encoding, sum(part_units), len(part_units), part_units)
