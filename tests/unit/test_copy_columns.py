"""A job page's intents are built as tuples in jobs/prepare.py's
INTENT_COLUMNS order and COPYed with the column list of
`copy_staged_intents`: the two must name the same columns in the same order."""

from __future__ import annotations

import re

from tidings.jobs.prepare import INTENT_COLUMNS
from tidings.store.queries import q


def test_staged_intents_are_copied_in_the_order_they_are_built() -> None:
    found = re.fullmatch(r"COPY staged_intents \((.*)\) FROM STDIN", q("copy_staged_intents"))
    assert found is not None
    assert tuple(found.group(1).split(", ")) == INTENT_COLUMNS
