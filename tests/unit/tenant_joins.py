"""Finds joins between tenant tables that do not equate `tenant_id`.

Citus runs a query on one shard only when every distributed table in it is
pinned to the same tenant: joined on `tenant_id` (`a.tenant_id =
b.tenant_id`, a row `(tenant_id, ...) IN (SELECT tenant_id, ...)`) or
compared to the same parameter. A join that misses that needs data from
every shard. This walks each named query's parse tree (PostgreSQL's own
parser, through pglast) scope by scope: a FROM list with its joins, a
correlated subquery together with the outer tables it names, a CTE or a
derived table as one more relation that carries `tenant_id` if it selects
it. A scope whose tenant tables do not all fall in one class of equal
`tenant_id`s is reported.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from pglast import ast, parse_sql

_PARAM = re.compile(r"%\((\w+)\)s")


def parse_named(sql: str) -> list[ast.RawStmt]:
    """A named query's statements, its `%(name)s` placeholders as `$n`."""
    names: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        return f"${names.setdefault(match.group(1), len(names) + 1)}"

    return list(parse_sql(_PARAM.sub(number, sql.replace("%%", "%"))))


@dataclass
class _Classes:
    """Union-find over `alias.tenant_id` and `$n` parameters."""

    parent: dict[str, str] = field(default_factory=dict)

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def join(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)


@dataclass
class _Relation:
    alias: str
    name: str
    tenant: bool  # carries tenant_id (a tenant table, or a CTE that selects it)


class JoinChecker:
    def __init__(self, tenant_tables: set[str]) -> None:
        self.tenant_tables = tenant_tables
        self.problems: list[str] = []

    def check(self, stmts: Iterable[ast.RawStmt]) -> list[str]:
        self.problems = []
        for raw in stmts:
            self._statement(raw.stmt, outer=[], ctes={})
        return self.problems

    # --- statements ------------------------------------------------------

    def _statement(self, node: ast.Node, outer: list[_Relation], ctes: dict[str, bool]) -> None:
        ctes = {**ctes, **self._ctes(getattr(node, "withClause", None), outer, ctes)}
        if isinstance(node, ast.SelectStmt) and node.op != 0:  # UNION and friends
            self._statement(node.larg, outer, ctes)
            self._statement(node.rarg, outer, ctes)
            return
        if isinstance(node, ast.InsertStmt):
            if node.selectStmt is not None:
                self._statement(node.selectStmt, outer, ctes)
            return
        own: list[_Relation] = []
        quals: list[ast.Node] = []
        if isinstance(node, (ast.UpdateStmt, ast.DeleteStmt)):
            own.append(self._relation(node.relation, ctes))
        from_items = getattr(node, "fromClause", None) or getattr(node, "usingClause", None) or ()
        for item in from_items:
            self._from_item(item, own, quals, outer, ctes)
        where = getattr(node, "whereClause", None)
        if where is not None:
            quals.append(where)
        self._scope(node, own, quals, outer, ctes)

    def _ctes(
        self, with_clause: ast.WithClause | None, outer: list[_Relation], ctes: dict[str, bool]
    ) -> dict[str, bool]:
        found: dict[str, bool] = {}
        for cte in with_clause.ctes if with_clause else ():
            self._statement(cte.ctequery, outer, {**ctes, **found})
            found[cte.ctename] = _selects_tenant(cte.ctequery)
        return found

    def _relation(self, var: ast.RangeVar, ctes: dict[str, bool]) -> _Relation:
        alias = var.alias.aliasname if var.alias else var.relname
        if var.relname in ctes:
            return _Relation(alias, var.relname, ctes[var.relname])
        return _Relation(alias, var.relname, var.relname in self.tenant_tables)

    def _from_item(
        self,
        item: ast.Node,
        own: list[_Relation],
        quals: list[ast.Node],
        outer: list[_Relation],
        ctes: dict[str, bool],
    ) -> None:
        if isinstance(item, ast.RangeVar):
            own.append(self._relation(item, ctes))
        elif isinstance(item, ast.JoinExpr):
            self._from_item(item.larg, own, quals, outer, ctes)
            self._from_item(item.rarg, own, quals, outer, ctes)
            if item.quals is not None:
                quals.append(item.quals)
            for name in item.usingClause or ():
                if name.sval == "tenant_id":
                    quals.append(_USING_TENANT)
        elif isinstance(item, ast.RangeSubselect):
            self._statement(item.subquery, outer + own if item.lateral else outer, ctes)
            alias = item.alias.aliasname if item.alias else "?"
            own.append(_Relation(alias, f"({alias})", _selects_tenant(item.subquery)))
        # RangeFunction (unnest of parameters) carries no table.

    # --- one scope -------------------------------------------------------

    def _scope(
        self,
        node: ast.Node,
        own: list[_Relation],
        quals: list[ast.Node],
        outer: list[_Relation],
        ctes: dict[str, bool],
    ) -> None:
        classes = _Classes()
        visible = own + outer
        named: set[str] = set()
        for expr in quals:
            for a, b in _equalities(expr):
                ka, kb = self._key(a, own, outer, named), self._key(b, own, outer, named)
                if ka and kb:
                    classes.join(ka, kb)
            if expr is _USING_TENANT:
                tenants = [r.alias for r in own if r.tenant]
                for a, b in itertools.pairwise(tenants):
                    classes.join(f"{a}.tenant_id", f"{b}.tenant_id")
        # Subqueries in this scope's expressions are scopes of their own,
        # seeing this scope's relations as outer ones.
        pinned = {classes.find(f"{r.alias}.tenant_id") for r in own if r.tenant}
        for expr in [*quals, *_expressions(node)]:
            for sub in _sublinks(expr):
                self._sublink(sub, visible, classes, pinned, ctes)
        for expr in [*quals, *_expressions(node)]:
            for ref in _column_refs(expr):
                qualifier = _qualifier(ref)
                if (
                    qualifier
                    and any(r.alias == qualifier for r in outer)
                    and not any(r.alias == qualifier for r in own)
                ):
                    named.add(qualifier)
        scope = [r for r in own if r.tenant] + [r for r in outer if r.tenant and r.alias in named]
        groups = {classes.find(f"{r.alias}.tenant_id") for r in scope}
        if len(scope) > 1 and len(groups) > 1:
            tables = ", ".join(sorted({r.name for r in scope}))
            self.problems.append(f"tenant_id not equated between {tables}")

    def _sublink(
        self,
        sub: ast.SubLink,
        visible: list[_Relation],
        classes: _Classes,
        pinned: set[str],
        ctes: dict[str, bool],
    ) -> None:
        self._statement(sub.subselect, visible, ctes)
        if sub.testexpr is None:
            return
        # `x IN (SELECT ...)` is a join too: tenant-first rows link it.
        left = sub.testexpr.args[0] if isinstance(sub.testexpr, ast.RowExpr) else sub.testexpr
        inner = _own_tenant_relations(sub.subselect, self, ctes)
        if not inner:
            return
        if _is_tenant_column(left) and _first_target_is_tenant(sub.subselect):
            return
        # Both sides pinned to the same tenant parameter.
        if any(classes.find(p) in pinned for p in _tenant_params(sub.subselect)):
            return
        self.problems.append(
            "a subquery over " + ", ".join(sorted(inner)) + " is matched without tenant_id"
        )

    def _key(
        self, node: ast.Node, own: list[_Relation], outer: list[_Relation], named: set[str]
    ) -> str | None:
        if isinstance(node, ast.ParamRef):
            return f"${node.number}"
        if isinstance(node, ast.TypeCast):
            return self._key(node.arg, own, outer, named)
        if not _is_tenant_column(node):
            return None
        qualifier = _qualifier(node)
        if qualifier is None:
            tenants = [r for r in own if r.tenant]
            return f"{tenants[0].alias}.tenant_id" if tenants else None
        if not any(r.alias == qualifier for r in own):
            named.add(qualifier)
        return f"{qualifier}.tenant_id"


_USING_TENANT = ast.String(sval="USING tenant_id")


def _own_tenant_relations(node: ast.Node, checker: JoinChecker, ctes: dict[str, bool]) -> set[str]:
    found: set[str] = set()
    for item in getattr(node, "fromClause", None) or ():
        for var in _range_vars(item):
            if var.relname in checker.tenant_tables or ctes.get(var.relname):
                found.add(var.relname)
    return found


def _range_vars(item: ast.Node) -> Iterator[ast.RangeVar]:
    if isinstance(item, ast.RangeVar):
        yield item
    elif isinstance(item, ast.JoinExpr):
        yield from _range_vars(item.larg)
        yield from _range_vars(item.rarg)


def _tenant_params(node: ast.Node) -> set[str]:
    """The parameters a statement's WHERE equates with a tenant_id."""
    found: set[str] = set()
    where = getattr(node, "whereClause", None)
    for a, b in _equalities(where) if where is not None else ():
        for col, param in ((a, b), (b, a)):
            if _is_tenant_column(col) and isinstance(param, ast.ParamRef):
                found.add(f"${param.number}")
    return found


def _selects_tenant(node: ast.Node) -> bool:
    if isinstance(node, ast.SelectStmt) and node.op != 0:
        return _selects_tenant(node.larg)
    targets = getattr(node, "targetList", None) or getattr(node, "returningList", None) or ()
    from_tables = [v for item in getattr(node, "fromClause", None) or () for v in _range_vars(item)]
    for target in targets:
        val = target.val
        if isinstance(val, ast.ColumnRef) and isinstance(val.fields[-1], ast.A_Star):
            # `*` of a table (or CTE) carries its tenant_id; of unnest(...) none.
            return bool(from_tables) or isinstance(node, (ast.DeleteStmt, ast.UpdateStmt))
        if target.name == "tenant_id" or (target.name is None and _is_tenant_column(val)):
            return True
    return False


def _first_target_is_tenant(node: ast.Node) -> bool:
    targets = getattr(node, "targetList", None) or ()
    if not targets:
        return False
    val = targets[0].val
    return _is_tenant_column(val) or (
        isinstance(val, ast.ColumnRef) and isinstance(val.fields[-1], ast.A_Star)
    )


def _is_tenant_column(node: ast.Node | None) -> bool:
    return (
        isinstance(node, ast.ColumnRef)
        and isinstance(node.fields[-1], ast.String)
        and node.fields[-1].sval == "tenant_id"
    )


def _qualifier(ref: ast.ColumnRef) -> str | None:
    return ref.fields[0].sval if len(ref.fields) > 1 else None


def _expressions(node: ast.Node) -> list[ast.Node]:
    """Target lists, SET clauses, HAVING: where scalar subqueries live."""
    found: list[ast.Node] = []
    for attr in ("targetList", "havingClause", "returningList"):
        value = getattr(node, attr, None)
        if value is not None:
            found.extend(value if isinstance(value, tuple) else (value,))
    return found


def _walk(node: object, *, into_subqueries: bool = False) -> Iterator[ast.Node]:
    if isinstance(node, tuple):
        for item in node:
            yield from _walk(item, into_subqueries=into_subqueries)
        return
    if not isinstance(node, ast.Node):
        return
    yield node
    if isinstance(node, ast.SubLink) and not into_subqueries:
        yield from _walk(node.testexpr)
        return
    for name in node:
        yield from _walk(getattr(node, name), into_subqueries=into_subqueries)


def _sublinks(expr: ast.Node) -> Iterator[ast.SubLink]:
    for node in _walk(expr):
        if isinstance(node, ast.SubLink):
            yield node


def _column_refs(expr: ast.Node) -> Iterator[ast.ColumnRef]:
    for node in _walk(expr):
        if isinstance(node, ast.ColumnRef):
            yield node


def _equalities(expr: ast.Node) -> Iterator[tuple[ast.Node, ast.Node]]:
    """`a = b` pairs joined by AND at the top (an OR proves nothing)."""
    if isinstance(expr, ast.BoolExpr):
        if expr.boolop == 0:  # AND
            for arg in expr.args:
                yield from _equalities(arg)
        return
    if not isinstance(expr, ast.A_Expr) or expr.kind != 0:
        return
    if [n.sval for n in expr.name] != ["="]:
        return
    left, right = expr.lexpr, expr.rexpr
    if isinstance(left, ast.RowExpr) and isinstance(right, ast.RowExpr):
        yield from zip(left.args, right.args, strict=False)
    else:
        yield left, right
