"""SMS segment counting: published boundaries and properties."""

from __future__ import annotations

import gsm0338  # noqa: F401  (registers the "gsm03.38" codec used as an oracle)
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.segments import (
    GSM7_BASIC,
    GSM7_EXTENSION,
    count_segments,
    encoding_of,
    split_parts,
    unit_cost,
    units_of,
)


def parts_of(text: str) -> tuple[str, ...]:
    return split_parts(text, encoding_of(text))


GSM_CHARS = sorted(GSM7_BASIC | GSM7_EXTENSION)
gsm_text = st.text(alphabet=st.sampled_from(GSM_CHARS), max_size=700)
any_text = st.text(max_size=400)
# Mixes emoji (surrogate pairs), extension characters and plain letters so
# boundaries land on the interesting characters often.
mixed_text = st.text(alphabet=st.sampled_from(["a", "€", "{", "😀", "ç", "é", "\f"]), max_size=500)


@pytest.mark.parametrize(
    ("text", "encoding", "units", "segments"),
    [
        ("", "GSM-7", 0, 1),
        ("a" * 160, "GSM-7", 160, 1),
        ("a" * 161, "GSM-7", 161, 2),
        ("a" * 306, "GSM-7", 306, 2),
        ("a" * 307, "GSM-7", 307, 3),
        ("ç" * 70, "UCS-2", 70, 1),
        ("ç" * 71, "UCS-2", 71, 2),
        ("ç" * 134, "UCS-2", 134, 2),
        ("ç" * 135, "UCS-2", 135, 3),
        ("€" * 80, "GSM-7", 160, 1),
        ("€" + "a" * 159, "GSM-7", 161, 2),
        ("😀" * 35, "UCS-2", 70, 1),
    ],
)
def test_published_boundaries(text: str, encoding: str, units: int, segments: int) -> None:
    count = count_segments(text)
    assert (count.encoding, count.units, count.segments) == (encoding, units, segments)


def test_cedilla_capital_is_gsm7_small_is_not() -> None:
    assert count_segments("Ç").encoding == "GSM-7"
    assert count_segments("ç").encoding == "UCS-2"


def test_one_non_gsm_character_makes_the_whole_message_ucs2() -> None:
    count = count_segments("a" * 100 + "ç")
    assert (count.encoding, count.units, count.segments) == ("UCS-2", 101, 2)


def test_escape_pair_at_153_boundary_moves_to_next_part() -> None:
    # 306 septets would be two parts, but the € at septets 153-154 cannot
    # straddle the boundary: part one ends at 152.
    count = count_segments("a" * 152 + "€" + "a" * 152)
    assert count.units == 306
    assert count.part_units == (152, 153, 1)


def test_escape_pair_that_fits_exactly_stays() -> None:
    assert count_segments("a" * 151 + "€" + "a" * 153).part_units == (153, 153)


def test_surrogate_pair_at_67_boundary_moves_to_next_part() -> None:
    count = count_segments("a" * 66 + "😀" + "a" * 66)
    assert count.units == 134
    assert count.part_units == (66, 67, 1)


def test_split_parts_keeps_emoji_whole() -> None:
    parts = parts_of("a" * 66 + "😀" + "a" * 66)
    assert parts[1].startswith("😀")


def test_escape_character_itself_is_not_gsm7() -> None:
    # A raw ESC would be read by the handset as the start of a pair.
    assert count_segments("\x1b").encoding == "UCS-2"


@given(gsm_text)
def test_gsm7_septets_match_the_gsm0338_codec(text: str) -> None:
    count = count_segments(text)
    assert count.encoding == "GSM-7"
    assert count.units == len(text.encode("gsm03.38"))


@given(any_text)
def test_gsm7_classification_matches_the_codec(text: str) -> None:
    try:
        text.encode("gsm03.38")
        encodable = "\x1b" not in text
    except UnicodeEncodeError:
        encodable = False
    assert (count_segments(text).encoding == "GSM-7") == encodable


@given(any_text)
def test_ucs2_units_are_utf16_code_units(text: str) -> None:
    count = count_segments(text)
    if count.encoding == "UCS-2":
        assert count.units == len(text.encode("utf-16-le")) // 2


@given(mixed_text)
def test_parts_rejoin_and_sum_to_total(text: str) -> None:
    count = count_segments(text)
    assert "".join(parts_of(text)) == text
    assert sum(count.part_units) == count.units
    assert len(count.part_units) == count.segments


@given(mixed_text)
def test_no_part_exceeds_its_capacity(text: str) -> None:
    count = count_segments(text)
    single, part = (160, 153) if count.encoding == "GSM-7" else (70, 67)
    limit = single if count.segments == 1 else part
    assert all(units <= limit for units in count.part_units)


@given(mixed_text)
def test_pairs_are_never_split(text: str) -> None:
    # Parts hold whole characters, and each part's units are exactly the
    # sum of its characters' costs: no pair is counted across a boundary.
    count = count_segments(text)
    for piece, units in zip(parts_of(text), count.part_units, strict=True):
        assert units == sum(unit_cost(ch, count.encoding) for ch in piece)
        assert not (piece and "\udc00" <= piece[0] <= "\udfff")


@given(mixed_text, st.sampled_from(["a", "€", "😀", "ç"]))
def test_segments_are_monotone_in_length(text: str, extra: str) -> None:
    # Holds even when the extra character switches GSM-7 to UCS-2: a GSM-7
    # character costs at most 2 septets, and 2 < 160/70 and 2 < 153/67.
    assert count_segments(text + extra).segments >= count_segments(text).segments


@given(gsm_text, gsm_text)
def test_appending_never_reduces_segments_within_gsm7(head: str, tail: str) -> None:
    assert count_segments(head + tail).segments >= count_segments(head).segments


# Any code point, lone surrogates included (st.text leaves those out).
raw_text = st.lists(st.integers(0, 0x10FFFF).map(chr), max_size=300).map("".join)


@given(st.one_of(raw_text, mixed_text, gsm_text))
def test_units_counted_in_c_match_the_per_character_costs(text: str) -> None:
    for encoding in ("GSM-7", "UCS-2"):
        if encoding == "GSM-7" and encoding_of(text) != "GSM-7":
            continue
        assert units_of(text, encoding) == sum(unit_cost(ch, encoding) for ch in text)
