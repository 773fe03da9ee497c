"""The hostile tenant's cases, in one place (issues #20, #39 and #43).

tests/security plays each once against one process and checks the whole
outcome; the reliability harness's hostile tenant replays every one of
them throughout a run, under faults (harness/reliability/hostile.py).
Each is tenant input that once cost other tenants their sends, or would
have: templates refused at publish, templates that fail their render at
send, and rows no check would let in, planted around the checks as a
buggy writer or an old release might.
"""

from __future__ import annotations

from typing import Any

import psycopg

# --- templates refused at publish ---------------------------------------

# Each is refused at publish: its constants alone exceed the default limits
# (100 000 iterations, 256 KiB per part).
PUBLISH_BOMBS: dict[str, dict[str, Any]] = {
    "nested_ranges": {
        "body": "{% for a in range(100000) %}{% for b in range(100000) %}"
        "xxxxxxxxxx{% endfor %}{% endfor %}"
    },
    "silent_nested_ranges": {
        "body": "{% for a in range(10**5) %}{% for b in range(10**5) %}{% endfor %}{% endfor %}"
    },
    "text_times_loop": {"body": "{% for a in range(100000) %}" + "x" * 100 + "{% endfor %}"},
    "center": {"body": "{{ 'x'|center(1000000000) }}"},
    "indent": {"body": "{{ 'x'|indent(1000000000) }}"},
    "ljust_method": {"body": "{{ 'x'.ljust(10**9) }}"},
    "percent_width": {"body": "{{ '%0999999999d' % 1 }}"},
    "format_filter_width": {"body": "{{ '%999999999s'|format('x') }}"},
    "str_format_width": {"body": "{{ '{:>999999999}'.format(1) }}"},
    "huge_range": {"body": "{{ range(10000000)|join(',') }}"},
    "sequence_repeat": {"body": "{{ 'x' * 1000000000 }}"},
    "batch_fill": {"body": "{{ [1]|batch(1000000000, 'x')|list }}"},
    "html_body_loops": {
        "channel": "email",
        "subject": "Report",
        "body": "See the HTML part.",
        "html_body": "{% for a in range(1000) %}{% for b in range(1000) %}<td/>"
        "{% endfor %}{% endfor %}",
    },
}
# pprint formats each nested level whole again (about 4 s here at 200
# levels): no notification needs it, so it is gone and refused at publish
# (SYNTAX_ERROR; the others say TEMPLATE_TOO_LARGE).
PPRINT = (
    "{% set ns = namespace(l=range(40000)|list) %}{% for i in range(d) %}"
    "{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l|pprint|length }}"
)


# --- templates valid at publish that fail their render at send ----------
# Each fails its intent with RENDER_LIMIT, once, and holds up nobody else.

# 8,000 distinct CJK characters: punycode's encoder is quadratic in them
# (about 7 s here, in pure Python under one call).
DISTINCT = "".join(chr(0x4E00 + i) for i in range(8000))
# A 400,000-character string, and `k` references to it: a list that costs
# nothing to build and k x 400,000 characters to compare or lowercase.
BIG = '{% set s = "a" * 100000 %}{% set s = s ~ s ~ s ~ s %}'
MILLION = '{% set s = "一" * 100000 %}{% set s = s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s %}'
# Two equal, distinct structures of 2^d leaves made of d shared levels:
# comparing or hashing them visits every leaf.
DAG = (
    "{% set ns = namespace(a=[], b=[]) %}{% for i in range(d) %}"
    "{% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}"
)
TUPLE_DAG = (
    "{% set ns = namespace(a=(), b=()) %}{% for i in range(d) %}"
    "{% set ns.a = (ns.a, ns.a) %}{% endfor %}"
)
FLOOD = "{{ range(0, k * p, p)"

# One call the step counter cannot interrupt (test_render_kill.py), so each
# is refused before the call. name: (body, variables). Each took seconds to
# hours in one call before.
UNINTERRUPTIBLE_BOMBS: dict[str, tuple[str, dict[str, Any]]] = {
    "punycode": ('{{ "' + DISTINCT + '".encode("punycode")|length }}', {}),
    "idna": ('{{ ("' + DISTINCT + '" ~ ".example").encode("idna")|length }}', {}),
    "strip_chars": ("{{ (w * n).strip(v * n ~ w)|length }}", {"w": "一", "v": "丁", "n": 100000}),
    "trim_chars": ("{{ (w * n)|trim(v * n ~ w)|length }}", {"w": "一", "v": "丁", "n": 100000}),
    "sort_aliases": (BIG + "{{ ([s] * k)|sort|length }}", {"k": 8000}),
    "max_aliases": (BIG + "{{ ([s] * k)|max|length }}", {"k": 30000}),
    "unique_aliases": (BIG + "{{ ([s] * k)|unique|list|length }}", {"k": 12000}),
    "select_equalto": (
        BIG + '{% set t = s[1:] ~ "a" %}{{ ([s] * k)|select("equalto", t)|list|length }}',
        {"k": 100000},
    ),
    "compare_dag": (DAG + "{{ ns.a == ns.b }}", {"d": 28}),
    "in_dag": (DAG + "{{ ns.a in [ns.b] }}", {"d": 28}),
    "loop_changed_dag": (
        DAG + "{% for x in [ns.a, ns.b] %}{{ loop.changed(x) }}{% endfor %}",
        {"d": 28},
    ),
    # textwrap slices what is left of a long word, or strips what is left
    # of a long blank run, once per line: quadratic in the run.
    "wordwrap_long_word": (BIG + "{{ s|wordwrap(1)|length }}", {}),
    "wordwrap_blank_run": (
        '{% set s = " " * 100000 %}{{ (s ~ s)|wordwrap(1)|length }}',
        {},
    ),
    # A string is one item per character: sorting or grouping a million
    # of them is one call of 1.5-2.5 s here.
    "sort_characters": (MILLION + "{{ s|sort|length }}", {}),
    "groupby_characters": (MILLION + "{{ s|groupby(0)|list|length }}", {}),
    # A namespace prints its attributes: the whole structure, built in one
    # str() before the output is counted (2 s at 2^23 here, 4 GB at 2^30).
    "print_namespace_dag": (DAG + "{{ ns }}", {"d": 24}),
    # Measured while small, then grown: a namespace is measured afresh.
    "namespace_grown": (
        "{% set ns = namespace(a=[]) %}{% set small = [ns] == [ns] %}"
        "{% for i in range(d) %}{% set ns.a = [ns.a, ns.a] %}{% endfor %}{{ ns }}",
        {"d": 24},
    ),
    "hash_dag": (TUPLE_DAG + "{{ {ns.a: 1}|length }}", {"d": 30}),
    # Multiples of 2^61 - 1 all hash to 0: a set or dict of k of them
    # probes k^2 / 2 times (22 s at 40,000 here).
    "hash_flood_unique": (FLOOD + "|unique|list|length }}", {"k": 40000, "p": 2**61 - 1}),
    "hash_flood_fromkeys": (
        "{{ {}.fromkeys(" + FLOOD[3:] + ")|length }}",
        {"k": 40000, "p": 2**61 - 1},
    ),
    "hash_flood_dict": (
        "{{ dict(" + FLOOD[3:] + "|batch(2))|length }}",
        {"k": 80000, "p": 2**61 - 1},
    ),
}

# Valid at publish (the size depends on the variables); too large at send.
VARIABLE_BOMBS: dict[str, tuple[str, dict[str, Any]]] = {
    # 1000 x 1000 = 10^6 iterations, 10^6 lines of output.
    "nested_loops": (
        "{% for a in rows %}{% for b in rows %}{{ a }}{{ b }}\n{% endfor %}{% endfor %}",
        {"rows": list(range(1000))},
    ),
    # A one-call allocation: a gigabyte of padding.
    "width": ("{{ pad|center(width) }}", {"pad": "x", "width": 10**9}),
    # Doubling a string 64 times: 2^64 characters.
    "doubling": (
        "{% set ns = namespace(s=seed) %}{% for i in range(times) %}"
        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
        {"seed": "x", "times": 64},
    ),
    # Exponential macro recursion: 2^60 calls.
    "recursion": (
        "{% macro d(n) %}{% if n %}{{ d(n - 1) }}{{ d(n - 1) }}{% else %}x{% endif %}"
        "{% endmacro %}{{ d(depth) }}",
        {"depth": 60},
    ),
}


# --- rows planted around the checks --------------------------------------

YEAR_10000 = "10000-01-01 00:00:00+00"
YEAR_0 = "0001-01-01 00:00:00+00 BC"
# The CHECK constraints of migration 0013, dropped for the planting and put
# back NOT VALID: new writes are checked, the planted rows stay.
BOUNDED = {
    "intents": ("expires_at", "not_before", "next_due_at"),
    "consents": ("captured_at", "revoked_at"),
}
# Variables nested past what Python's JSON decoder will recurse into.
NESTED_VARIABLES = "(repeat('[', 5000) || repeat(']', 5000))::jsonb"


def plant(
    conn: psycopg.Connection[Any],
    sql: str,
    params: tuple[Any, ...] = (),
    tables: tuple[str, ...] = tuple(BOUNDED),
) -> None:
    """Run `sql` with the date CHECKs of `tables` lifted, then put them back
    NOT VALID: new writes are checked again, the planted rows stay. In the
    caller's transaction, which holds each table's ACCESS EXCLUSIVE lock
    until it ends. Test-only SQL over fixed names."""
    for table in tables:
        for column in BOUNDED[table]:
            conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {table}_{column}_bounded")
    conn.execute(sql, params)
    for table in tables:
        for column in BOUNDED[table]:
            conn.execute(
                f"ALTER TABLE {table} ADD CONSTRAINT {table}_{column}_bounded CHECK "
                f"({column} >= '1970-01-01 00:00:00+00'"
                f" AND {column} < '9000-01-01 00:00:00+00') NOT VALID"
            )
