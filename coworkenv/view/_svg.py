"""Small inline SVG charts (line and grouped bars) for pages that must stand alone: no script, no
library, no network. Every mark carries a ``<title>`` with its value, so a reader (or a test) can
read what is drawn."""

from __future__ import annotations

from html import escape

WIDTH, HEIGHT = 560, 220
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 12, 40
COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563")


def _number(value: float) -> str:
    return f"{value:.3g}"


def _frame(title: str, lo: float, hi: float) -> list[str]:
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}"><title>{escape(title)}</title>',
             f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}" stroke="#999"/>',
             f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" stroke="#999"/>']
    for value, y in ((hi, TOP), (lo, HEIGHT - BOTTOM)):
        parts.append(f'<text x="{LEFT - 4}" y="{y + 4}" text-anchor="end" font-size="10">{_number(value)}</text>')
    return parts


def _legend(names: list[str]) -> list[str]:
    parts, x = [], LEFT
    for i, name in enumerate(names):
        parts.append(f'<rect x="{x}" y="{HEIGHT - 14}" width="10" height="10" fill="{COLOURS[i % len(COLOURS)]}"/>'
                     f'<text x="{x + 14}" y="{HEIGHT - 5}" font-size="10">{escape(name)}</text>')
        x += 24 + 6 * len(name)
    return parts


def line_chart(title: str, series: dict[str, list[tuple[float, float]]]) -> str:
    """Lines of (x, y) points, one per series, on shared axes."""
    points = [p for values in series.values() for p in values]
    if not points:
        return ""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x_lo, x_hi = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y_lo, y_hi = min(0.0, min(ys)), max(ys) if max(ys) > min(0.0, min(ys)) else min(0.0, min(ys)) + 1

    def at(x: float, y: float) -> tuple[float, float]:
        return (LEFT + (x - x_lo) / (x_hi - x_lo) * (WIDTH - LEFT - RIGHT),
                HEIGHT - BOTTOM - (y - y_lo) / (y_hi - y_lo) * (HEIGHT - TOP - BOTTOM))

    parts = _frame(title, y_lo, y_hi)
    parts.append(f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - BOTTOM + 12}" text-anchor="end" font-size="10">'
                 f'{_number(x_hi)}</text><text x="{LEFT}" y="{HEIGHT - BOTTOM + 12}" font-size="10">{_number(x_lo)}</text>')
    for i, (name, values) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        coords = [at(x, y) for x, y in values]
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                     f'points="{" ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in coords)}"/>')
        for (x, y), (cx, cy) in zip(values, coords, strict=True):
            parts.append(f'<circle class="point" cx="{cx:.1f}" cy="{cy:.1f}" r="2" fill="{colour}">'
                         f'<title>{escape(name)} at {_number(x)}: {_number(y)}</title></circle>')
    parts += _legend(list(series))
    return "".join(parts) + "</svg>"


def bar_chart(title: str, groups: list[str], series: dict[str, list[float | None]], top: float = 1.0) -> str:
    """Grouped bars: for each group, one bar per series (None: no bar), on a 0..``top`` scale."""
    if not groups or not series:
        return ""
    parts = _frame(title, 0.0, top)
    slot = (WIDTH - LEFT - RIGHT) / len(groups)
    bar = slot * 0.8 / len(series)
    for g, group in enumerate(groups):
        parts.append(f'<text x="{LEFT + slot * (g + 0.5):.1f}" y="{HEIGHT - BOTTOM + 12}" text-anchor="middle" '
                     f'font-size="10">{escape(group)}</text>')
        for s, (name, values) in enumerate(series.items()):
            value = values[g]
            if value is None:
                continue
            height = max(0.0, min(value, top)) / top * (HEIGHT - TOP - BOTTOM)
            x = LEFT + slot * g + slot * 0.1 + bar * s
            parts.append(f'<rect class="bar" x="{x:.1f}" y="{HEIGHT - BOTTOM - height:.1f}" width="{bar:.1f}" '
                         f'height="{height:.1f}" fill="{COLOURS[s % len(COLOURS)]}">'
                         f'<title>{escape(name)}, {escape(group)}: {_number(value)}</title></rect>')
    parts += _legend(list(series))
    return "".join(parts) + "</svg>"
