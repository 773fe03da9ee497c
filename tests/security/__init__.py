"""Attacks by a hostile tenant, each reproduced first and pinned (invariant 11)."""
