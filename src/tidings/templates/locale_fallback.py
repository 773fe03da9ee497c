"""Which revision of a template a message in a given locale is rendered from."""

from __future__ import annotations

from collections.abc import Iterable

from tidings.templates.model import (
    DEFAULT_LOCALE,
    RevisionNotFoundError,
    TemplateRevision,
    locale_language,
    normalize_locale,
)


def choose_revision(
    candidates: Iterable[TemplateRevision],
    locale: str | None,
    default_locale: str = DEFAULT_LOCALE,
) -> TemplateRevision:
    """Pick the revision for ``locale`` from ``candidates`` (one template name
    and channel; the caller filters). Order, first hit wins:

    1. exact locale (case/underscore-insensitive: ``de_at`` == ``de-AT``);
    2. the bare language (``de-AT`` -> ``de``);
    3. another region of the same language (``de-AT`` -> ``de-CH``),
       alphabetically first, so the choice is deterministic;
    4. the default locale, then the default locale's language.

    Among several revisions of one locale the highest revision number wins
    (then the content hash, for total determinism). Raises
    :class:`RevisionNotFoundError` when nothing matches.
    """
    by_locale: dict[str, TemplateRevision] = {}
    for rev in candidates:
        key = normalize_locale(rev.locale)
        current = by_locale.get(key)
        if current is None or (rev.revision, rev.content_hash) > (
            current.revision,
            current.content_hash,
        ):
            by_locale[key] = rev
    if not by_locale:
        raise RevisionNotFoundError("no candidate revisions")

    def lookup(wanted: str) -> TemplateRevision | None:
        if not wanted:
            return None
        exact = by_locale.get(wanted)
        if exact is not None:
            return exact
        lang = locale_language(wanted)
        if lang in by_locale:
            return by_locale[lang]
        regional = sorted(k for k in by_locale if locale_language(k) == lang)
        return by_locale[regional[0]] if regional else None

    for wanted in (normalize_locale(locale or ""), normalize_locale(default_locale)):
        found = lookup(wanted)
        if found is not None:
            return found
    available = ", ".join(sorted(by_locale))
    raise RevisionNotFoundError(
        f"no revision for locale {locale!r} or default {default_locale!r} (have: {available})"
    )


__all__ = ["choose_revision"]
