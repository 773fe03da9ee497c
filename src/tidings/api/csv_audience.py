"""CSV audiences for `POST /v1/audiences`: a header row, then one
recipient per row, as a spreadsheet exports them.

Columns named `ref`, `phone`, `email`, `timezone`, `locale` and
`preferences` are those fields of an NDJSON member; GOV.UK Notify's
`phone number` and `email address` are accepted for the two destinations,
and names match whatever their case and with `_` or `-` for spaces. Every
other column is a template variable, named by its header as written (what
Notify calls personalisation). An empty cell is absent. A row without a
`ref` is named `row-<n>`, its row in the file (the header is row 1).

The body is read as it arrives: `records` turns the numbered lines of
`api/streaming.py` into rows with the stdlib `csv` module, joining lines
only while a quoted field is open, so a row is held at most `MAX_ROW_BYTES`
whatever the file's size. Cells are text and stay text: a cell such as
`=cmd|...` is stored as those characters, never evaluated. Errors are
`InvalidLine`s naming the line a row starts on and its column as written
in the header; `member` reports every bad cell of a row at once.
"""

from __future__ import annotations

import csv
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from tidings.api.schemas.jobs import AudienceMemberIn
from tidings.client.uploads import member_problems
from tidings.domain.errors import InvalidLine, InvalidLines

MEDIA_TYPES = ("text/csv", "application/csv")
# A row, quoted newlines and all, may weigh what an NDJSON line may.
MAX_ROW_BYTES = 64 * 1024
MAX_COLUMNS = 100
FIELDS = {
    "ref": "ref",
    "phone": "phone",
    "phone number": "phone",
    "email": "email",
    "email address": "email",
    "timezone": "timezone",
    "time zone": "timezone",
    "locale": "locale",
    "preferences": "preferences",
}
IDENTIFYING = {"ref", "phone", "email"}


@dataclass(frozen=True)
class Row:
    line: int  # the physical line the row starts on (1-based)
    number: int  # its row in the file, the header being row 1
    cells: list[str]


async def records(lines: AsyncIterator[tuple[int, bytes]]) -> AsyncIterator[Row]:
    """Every row with a non-empty cell, header included, as it arrives."""
    parts: list[str] = []
    start = size = quotes = number = 0
    async for line, raw in lines:
        text = _decoded(line, raw)
        if not parts:
            start = line
        parts.append(text)
        size += len(raw) + 1
        quotes += text.count('"')
        if size > MAX_ROW_BYTES:
            too_long = f"longer than {MAX_ROW_BYTES} bytes (a quote not closed?)"
            raise InvalidLine(start, "row", too_long)
        if quotes % 2:  # a quoted field goes on on the next line
            continue
        number += 1
        cells = _cells(start, "\n".join(parts).removesuffix("\r"))
        parts, size, quotes = [], 0, 0
        if any(cell.strip() for cell in cells):
            yield Row(start, number, cells)
    if parts:
        raise InvalidLine(start, "row", "a quoted field is never closed")


def _decoded(line: int, raw: bytes) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidLine(line, "line", "not UTF-8 text: save the file as CSV UTF-8") from None
    return text.removeprefix("\ufeff") if line == 1 else text


def _cells(line: int, record: str) -> list[str]:
    try:
        rows = list(csv.reader([record], strict=True))
    except csv.Error as exc:
        raise InvalidLine(line, "row", f"not valid CSV ({exc})") from None
    if len(rows) > 1:
        raise InvalidLine(line, "row", "a row ends with a bare carriage return; use CRLF or LF")
    return rows[0] if rows else []


@dataclass(frozen=True)
class Header:
    names: tuple[str, ...]  # as written, trimmed
    fields: tuple[str | None, ...]  # the member field, or None for a variable

    def column(self, field: str) -> str:
        """The header's name for a member field, as the client wrote it."""
        return next((n for n, f in zip(self.names, self.fields, strict=True) if f == field), field)


def header(row: Row) -> Header:
    names = tuple(cell.strip() for cell in row.cells)
    if len(names) > MAX_COLUMNS:
        raise InvalidLine(row.line, "header", f"{len(names)} columns; at most {MAX_COLUMNS}")
    fields = tuple(_known(name) for name in names)
    if not IDENTIFYING & set(fields):
        raise InvalidLine(
            row.line,
            "header",
            "the first row must be a header row naming the columns, among them ref, phone"
            " (or phone number) or email (or email address)",
        )
    seen: dict[str, str] = {}
    for name, field in zip(names, fields, strict=True):
        key = field or name
        if name and key in seen:
            raise InvalidLine(row.line, name, f"the column is given twice (as {seen[key]!r})")
        seen[key] = name
    return Header(names, fields)


def _known(name: str) -> str | None:
    return FIELDS.get(" ".join(name.lower().replace("_", " ").replace("-", " ").split()))


def member(head: Header, row: Row) -> dict[str, Any]:
    """The row as an NDJSON member; `InvalidLines` naming every bad cell."""
    item, errors = _item(head, row)
    if not errors:
        errors = [InvalidLine(row.line, head.column(f), m) for f, m in _problems(item)]
    if errors:
        raise InvalidLines(errors)
    return item


def _item(head: Header, row: Row) -> tuple[dict[str, Any], list[InvalidLine]]:
    item: dict[str, Any] = {}
    variables: dict[str, str] = {}
    errors = _extra_cells(head, row)
    for index, cell in enumerate(row.cells[: len(head.names)]):
        name, field = head.names[index], head.fields[index]
        if not cell.strip():
            continue
        if not name:
            errors.append(InvalidLine(row.line, f"column {index + 1}", "the column has no name"))
        elif field == "preferences":
            item[field] = [p for p in re.split(r"[\s,;]+", cell) if p]
        elif field is not None:
            item[field] = cell.strip()
        else:
            variables[name] = cell
    if "ref" not in item and ("phone" in item or "email" in item):
        item["ref"] = f"row-{row.number}"
    elif "ref" not in item:
        errors.append(InvalidLine(row.line, "ref", "a row without a ref needs a phone or email"))
    if variables:
        item["variables"] = variables
    return item, errors


def _extra_cells(head: Header, row: Row) -> list[InvalidLine]:
    extra = [i for i, cell in enumerate(row.cells) if i >= len(head.names) and cell.strip()]
    if not extra:
        return []
    where = f"column {extra[0] + 1}"
    return [InvalidLine(row.line, where, f"a cell beyond the header's {len(head.names)} columns")]


def _problems(item: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for each bad field: the API schema's checks, then
    the domain's (numbers, addresses, time zones), field by field."""
    try:
        parsed = AudienceMemberIn.model_validate(item).model_dump(exclude_none=True)
    except ValidationError as exc:
        # Only pydantic's message and location, never its `input`.
        found = exc.errors(include_url=False, include_input=False)
        return [(_field(e["loc"]), e["msg"]) for e in found]
    return member_problems(parsed)


def _field(loc: Sequence[int | str]) -> str:
    # A variable's problem names its column; any other, the field's.
    if len(loc) > 1 and loc[0] == "variables":
        return str(loc[1])
    return str(loc[0]) if loc else "row"
