"""Every field and parameter of the HTTP contract says what it is (#40, item 8).

A generated client turns each `description` into the docstring of the
attribute or argument it makes; a field without one is a name to guess at.
The document is built without a database, as the docs build makes it.

Walked: every property of every schema in components/schemas, at any
depth (nested inline objects, array items, anyOf/oneOf/allOf branches),
the same inside inline request and response bodies, and every operation
parameter. A property that is a `$ref` carries its description beside the
`$ref` (pydantic puts it there, as JSON Schema 2020-12 allows), so the
description is looked for on the property itself only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tidings.docs_gen import openapi_document

BRANCHES = ("anyOf", "oneOf", "allOf")


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return openapi_document()


def undescribed_properties(schema: dict[str, Any], where: str) -> Iterator[str]:
    """`where.property` for each property below `schema` without a description."""
    for name, prop in schema.get("properties", {}).items():
        if not str(prop.get("description", "")).strip():
            yield f"{where}.{name}"
        yield from undescribed_properties(prop, f"{where}.{name}")
    for key in BRANCHES:
        for branch in schema.get(key, []):
            yield from undescribed_properties(branch, where)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from undescribed_properties(schema[key], f"{where}[]")


def operations(document: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            yield f"{method.upper()} {path}", operation


def undescribed(document: dict[str, Any]) -> list[str]:
    found: list[str] = []
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        found += undescribed_properties(schema, name)
    for where, operation in operations(document):
        for parameter in operation.get("parameters", []):
            if not str(parameter.get("description", "")).strip():
                found.append(f"{where} ({parameter['in']} parameter {parameter['name']})")
        bodies = [("request", operation.get("requestBody", {}))]
        bodies += [(f"{status} answer", r) for status, r in operation["responses"].items()]
        for label, body in bodies:
            for media, content in body.get("content", {}).items():
                schema = content.get("schema", {})
                found += undescribed_properties(schema, f"{where} {label} {media}")
    return found


def test_every_field_and_parameter_is_described(document: dict[str, Any]) -> None:
    missing = undescribed(document)
    assert not missing, f"{len(missing)} without a description:\n" + "\n".join(missing)


def test_the_walk_reaches_nested_fields_and_parameters() -> None:
    made = {
        "paths": {
            "/x/{id}": {
                "get": {
                    "parameters": [{"name": "id", "in": "path"}],
                    "responses": {
                        "200": {
                            "content": {
                                "application/json": {
                                    "schema": {"properties": {"a": {"description": "A"}}}
                                }
                            }
                        }
                    },
                }
            }
        },
        "components": {
            "schemas": {
                "Out": {
                    "properties": {
                        "ok": {"description": "fine"},
                        "blank": {"description": " "},
                        "inner": {
                            "description": "an object",
                            "anyOf": [{"properties": {"deep": {}}}, {"type": "null"}],
                        },
                        "rows": {"description": "rows", "items": {"properties": {"cell": {}}}},
                    }
                }
            }
        },
    }
    assert undescribed(made) == [
        "Out.blank",
        "Out.inner.deep",
        "Out.rows[].cell",
        "GET /x/{id} (path parameter id)",
    ]
