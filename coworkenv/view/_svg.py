"""Small inline SVG charts (line and grouped bars) for pages that must stand alone: no script, no
library, no network. Every mark carries a ``<title>`` with its value, so a reader (or a test) can
read what is drawn.

Labels are laid out so that none overlaps another: group labels turn slanted when they do not fit
under their group, the legend takes a line per series, and a name too long for the chart is cut
with its whole text in its ``<title>``. A bar of 0 is drawn as a mark on the axis with its value, so
that an evaluation where nothing passed reads as 0, not as an empty chart.
"""

from __future__ import annotations

import math
from html import escape

WIDTH = 560
PLOT_HEIGHT = 168  # the plotting area; labels and the legend add to the chart's height below it
LEFT, RIGHT, TOP = 48, 12, 14
FONT = 10
CHAR = 6.2  # the width of one character at FONT, generous for a sans-serif face
LEGEND_LINE = 14
SLANT = 35  # degrees group labels turn by when they do not fit side by side
COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563")


def _number(value: float) -> str:
    return f"{value:.3g}"


def _fit(text: str, width: float) -> str:
    """``text`` cut to about ``width`` pixels at FONT (with an ellipsis)."""
    most = max(3, int(width / CHAR))
    return text if len(text) <= most else text[:most - 1] + "…"


def _frame(title: str, lo: float, hi: float, height: float, left: float = LEFT) -> list[str]:
    bottom = TOP + PLOT_HEIGHT
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{WIDTH}" height="{height:.0f}" '
             f'viewBox="0 0 {WIDTH} {height:.0f}"><title>{escape(title)}</title>',
             f'<line x1="{left:.1f}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}" stroke="#999"/>',
             f'<line x1="{left:.1f}" y1="{TOP}" x2="{left:.1f}" y2="{bottom}" stroke="#999"/>']
    for value, y in ((hi, TOP), (lo, bottom)):
        parts.append(f'<text class="axis" x="{left - 4:.1f}" y="{y + 4}" text-anchor="end" font-size="{FONT}">'
                     f'{_number(value)}</text>')
    return parts


def _legend(names: list[str], top: float) -> list[str]:
    """One line per series from ``top`` down (a name too long for the chart is cut; its title is whole)."""
    parts = []
    for i, name in enumerate(names):
        y = top + i * LEGEND_LINE
        parts.append(f'<g class="legend"><title>{escape(name)}</title>'
                     f'<rect x="{LEFT}" y="{y}" width="10" height="10" fill="{COLOURS[i % len(COLOURS)]}"/>'
                     f'<text x="{LEFT + 14}" y="{y + 9}" font-size="{FONT}">'
                     f'{escape(_fit(name, WIDTH - LEFT - RIGHT - 14))}</text></g>')
    return parts


def _legend_height(names: list[str]) -> float:
    return len(names) * LEGEND_LINE + 4


def line_chart(title: str, series: dict[str, list[tuple[float, float]]]) -> str:
    """Lines of (x, y) points, one per series, on shared axes."""
    points = [p for values in series.values() for p in values]
    if not points:
        return ""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x_lo, x_hi = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y_lo, y_hi = min(0.0, min(ys)), max(ys) if max(ys) > min(0.0, min(ys)) else min(0.0, min(ys)) + 1
    bottom = TOP + PLOT_HEIGHT
    names = list(series)
    height = bottom + 20 + _legend_height(names)

    def at(x: float, y: float) -> tuple[float, float]:
        return (LEFT + (x - x_lo) / (x_hi - x_lo) * (WIDTH - LEFT - RIGHT),
                bottom - (y - y_lo) / (y_hi - y_lo) * PLOT_HEIGHT)

    parts = _frame(title, y_lo, y_hi, height)
    parts.append(f'<text class="axis" x="{WIDTH - RIGHT}" y="{bottom + 13}" text-anchor="end" font-size="{FONT}">'
                 f'{_number(x_hi)}</text><text class="axis" x="{LEFT}" y="{bottom + 13}" font-size="{FONT}">'
                 f'{_number(x_lo)}</text>')
    for i, (name, values) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        coords = [at(x, y) for x, y in values]
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                     f'points="{" ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in coords)}"/>')
        for (x, y), (cx, cy) in zip(values, coords, strict=True):
            parts.append(f'<circle class="point" cx="{cx:.1f}" cy="{cy:.1f}" r="2" fill="{colour}">'
                         f'<title>{escape(name)} at {_number(x)}: {_number(y)}</title></circle>')
    parts += _legend(names, bottom + 22)
    return "".join(parts) + "</svg>"


def bar_chart(title: str, groups: list[str], series: dict[str, list[float | None]], top: float = 1.0,
              *, percent: bool = False) -> str:
    """Grouped bars: for each group, one bar per series (None: no bar), on a 0..``top`` scale, each
    with its value written above it where the bar is wide enough (a 0 always: as a mark on the axis).
    ``percent``: values are shares, written as percentages."""
    if not groups or not series:
        return ""
    bottom = TOP + PLOT_HEIGHT
    left = LEFT
    slot = (WIDTH - left - RIGHT) / len(groups)
    widest = max(len(g) for g in groups) * CHAR
    slanted = widest > slot - 4
    if slanted:  # the first group's label runs down-left from under its group: room for it on the left
        left = max(LEFT, widest * math.cos(math.radians(SLANT)) - slot / 2 + 8)
        slot = (WIDTH - left - RIGHT) / len(groups)
    bar = slot * 0.8 / len(series)
    band = (widest * math.sin(math.radians(SLANT)) + FONT + 6) if slanted else FONT + 8
    names = list(series)
    height = bottom + band + _legend_height(names) + 4
    parts = _frame(title, 0.0, top, height, left)
    for g, group in enumerate(groups):
        x = left + slot * (g + 0.5)
        if slanted:
            parts.append(f'<text class="group" x="{x:.1f}" y="{bottom + 12}" text-anchor="end" font-size="{FONT}" '
                         f'transform="rotate(-{SLANT} {x:.1f} {bottom + 12})">{escape(group)}</text>')
        else:
            parts.append(f'<text class="group" x="{x:.1f}" y="{bottom + 13}" text-anchor="middle" '
                         f'font-size="{FONT}">{escape(group)}</text>')
        for s, (name, values) in enumerate(series.items()):
            value = values[g]
            if value is None:
                continue
            shown = f"{value:.0%}" if percent else _number(value)
            drawn = max(0.0, min(value, top)) / top * PLOT_HEIGHT
            x = left + slot * g + slot * 0.1 + bar * s
            parts.append(f'<rect class="bar" x="{x:.1f}" y="{bottom - max(drawn, 2.0):.1f}" width="{bar:.1f}" '
                         f'height="{max(drawn, 2.0):.1f}" fill="{COLOURS[s % len(COLOURS)]}">'
                         f'<title>{escape(name)}, {escape(group)}: {shown}</title></rect>')
            if bar >= len(shown) * CHAR * 0.9:  # 9-point text fits the bar
                parts.append(f'<text class="value" x="{x + bar / 2:.1f}" y="{bottom - max(drawn, 2.0) - 3:.1f}" '
                             f'text-anchor="middle" font-size="9">{shown}</text>')
    if all(not v for values in series.values() for v in values if v is not None):
        parts.append(f'<text class="note" x="{(left + WIDTH - RIGHT) / 2:.1f}" y="{TOP + PLOT_HEIGHT / 2:.1f}" '
                     f'text-anchor="middle" font-size="{FONT + 2}">every value is 0</text>')
    parts += _legend(names, bottom + band)
    return "".join(parts) + "</svg>"
