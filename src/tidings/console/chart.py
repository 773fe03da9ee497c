"""Hand-written SVG: a stacked area chart of states over time and stacked
progress bars. Colours come from CSS classes (`s-<state>`), so the palette
lives in one place (console.css) and the page needs no inline style, which
keeps the Content-Security-Policy strict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from markupsafe import Markup, escape

from tidings.console.data import STATE_ORDER, Series

WIDTH, HEIGHT = 760, 220
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 44, 12, 12, 26


def states_chart(series: Series) -> Markup:
    points = len(series.minutes)
    if points < 2 or not series.values:
        return Markup('<p class="muted">No intents in the last hour.</p>')
    totals = [sum(v[i] for v in series.values.values()) for i in range(points)]
    top = max(max(totals), 1)
    plot_w = WIDTH - PAD_LEFT - PAD_RIGHT
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM

    def x(i: int) -> float:
        return PAD_LEFT + plot_w * i / (points - 1)

    def y(v: float) -> float:
        return PAD_TOP + plot_h * (1 - v / top)

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        'aria-labelledby="chart-title">',
        '<title id="chart-title">Intents by state, per minute, last hour</title>',
    ]
    for v in (0, top // 2, top):
        parts.append(
            f'<line class="grid" x1="{PAD_LEFT}" x2="{WIDTH - PAD_RIGHT}" '
            f'y1="{y(v):.1f}" y2="{y(v):.1f}"/>'
            f'<text class="axis" x="{PAD_LEFT - 6}" y="{y(v) + 4:.1f}" '
            f'text-anchor="end">{v}</text>'
        )
    base = [0] * points
    for state in STATE_ORDER:
        values = series.values.get(state)
        if values is None:
            continue
        upper = [b + v for b, v in zip(base, values, strict=True)]
        outline = [f"{x(i):.1f},{y(upper[i]):.1f}" for i in range(points)]
        back = [f"{x(i):.1f},{y(base[i]):.1f}" for i in reversed(range(points))]
        parts.append(
            f'<polygon class="area s-{state}" points="{" ".join(outline + back)}">'
            f"<title>{state}: {values[-1]} now</title></polygon>"
        )
        base = upper
    for i, label in ((0, "−60 min"), (points // 2, "−30 min"), (points - 1, "now")):
        anchor = "start" if i == 0 else "end" if i == points - 1 else "middle"
        parts.append(
            f'<text class="axis" x="{x(i):.1f}" y="{HEIGHT - 6}" '
            f'text-anchor="{anchor}">{label}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def progress_bar(counts: Mapping[str, int], order: Sequence[str] = STATE_ORDER) -> Markup:
    """One bar, one segment per state, widths in SVG attributes (no inline CSS)."""
    total = sum(counts.values())
    if total == 0:
        return Markup(
            '<svg class="bar" viewBox="0 0 100 10"><rect class="track" '
            'width="100" height="10"/></svg>'
        )
    parts = [
        '<svg class="bar" viewBox="0 0 100 10" preserveAspectRatio="none">',
        '<rect class="track" width="100" height="10"/>',
    ]
    offset = 0.0
    for state in order:
        n = counts.get(state, 0)
        if not n:
            continue
        width = 100 * n / total
        parts.append(
            f'<rect class="s-{state}" x="{offset:.3f}" width="{width:.3f}" height="10">'
            f"<title>{escape(state)}: {n}</title></rect>"
        )
        offset += width
    parts.append("</svg>")
    return Markup("".join(parts))
