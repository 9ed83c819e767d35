"""Pictures the apps store while seeding: the spreadsheets app's charts, the finance app's scanned
receipts (PNG) and vendor invoices (PDF), drawn with Pillow from the records' own data.

Host only: seeding runs on the host, and the sandbox has only the standard library. No app imports
this module at its top, only inside ``seed``, so tools never load it (``tests/workspace`` checks
that importing every app loads neither this module nor Pillow). Every picture is drawn from the
seed's ``rng`` and the record, never from the wall clock, so a seed draws the same bytes.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import io
import math
import random
from typing import Any

try:
    from PIL import Image, ImageDraw, ImageFilter, ImageFont
except ImportError:  # pragma: no cover - a prerequisite, named
    raise RuntimeError("seeding draws charts, receipts and invoices with Pillow: pip install pillow") from None


# ---------------------------------------------------------------- charts (spreadsheets)

CHART_SIZE = (512, 288)  # pixels
CHART_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]  # one per series, in turn


def chart_png(title: str, data: dict[str, Any]) -> str:
    """A bar chart of ``data`` (its title above, a value over each bar, the labels along the bottom
    turned 30 degrees, a legend when there are several series) drawn with Pillow, as base64 PNG
    text."""

    labels, series = [str(label) for label in data["labels"]], data["series"]
    heights = [[v if isinstance(v, (int, float)) else 0 for v in s["values"]] for s in series]
    low = min([0, *(h for row in heights for h in row)])
    high = max([0, *(h for row in heights for h in row)])
    step = _tick_step((high - low) * 1.2 or 1)
    top, bottom = _round_up(high * 1.2, step), -_round_up(-low * 1.2, step)
    if top == bottom:  # every value 0
        top = 5 * step
    title_font, tick_font, value_font = (_font(size) for size in (14, 11, 9))
    ticks = [bottom + i * step for i in range(round((top - bottom) / step) + 1)]
    tick_texts = [f"{t:,.0f}" for t in ticks]

    image = Image.new("RGB", CHART_SIZE, "white")
    draw = ImageDraw.Draw(image)
    turned = [_turned(label, tick_font, 30) for label in labels]
    left = 12 + max(draw.textlength(text, font=tick_font) for text in tick_texts)
    plot_bottom = CHART_SIZE[1] - 8 - max((t.height for t in turned), default=0)
    plot = (left, 30, CHART_SIZE[0] - 10, max(plot_bottom, 120))
    x0, y0, x1, y1 = plot

    def y_of(value: float) -> float:
        return y1 - (value - bottom) / (top - bottom) * (y1 - y0)

    draw.text(((x0 + x1) / 2, 8), title, font=title_font, fill="black", anchor="ma")
    for tick, text in zip(ticks, tick_texts, strict=True):
        draw.line([(x0 - 4, y_of(tick)), (x0, y_of(tick))], fill="black")
        draw.text((x0 - 6, y_of(tick)), text, font=tick_font, fill="black", anchor="rm")
    slot = (x1 - x0) / max(len(labels), 1)
    width = slot * 0.8 / max(len(series), 1)
    for i, label in enumerate(turned):
        centre = x0 + slot * (i + 0.5)
        draw.line([(centre, y1), (centre, y1 + 4)], fill="black")
        image.paste(label, (round(centre - label.width), y1 + 6), label)  # its right end under the tick
        for n, row in enumerate(heights):
            if i >= len(row):
                continue
            left_edge = centre - slot * 0.4 + n * width
            y_top, y_zero = y_of(row[i]), y_of(0)
            draw.rectangle([left_edge, min(y_top, y_zero), left_edge + width - 1, max(y_top, y_zero)],
                           fill=CHART_COLOURS[n % len(CHART_COLOURS)])
            value, below = f"{row[i]:,.0f}", row[i] < 0  # a value beyond its bar's end: under a bar going down
            if len(series) > 1:
                mark = _turned(value, value_font, 90)
                at = y_top + 3 if below else y_top - 3 - mark.height
                image.paste(mark, (round(left_edge + width / 2 - mark.width / 2), round(at)), mark)
            else:
                draw.text((left_edge + width / 2, y_top + 3 if below else y_top - 3), value, font=value_font,
                          fill="black", anchor="ma" if below else "md")
    draw.rectangle(plot, outline="black")
    if len(series) > 1:
        names = [str(s["name"]) for s in series]
        box_width = 26 + max(draw.textlength(name, font=tick_font) for name in names)
        bx, by = x1 - box_width - 6, y0 + 6
        draw.rectangle([bx, by, bx + box_width, by + 6 + 15 * len(names)], fill="white", outline="#cccccc")
        for n, name in enumerate(names):
            row_y = by + 5 + 15 * n
            draw.rectangle([bx + 5, row_y + 2, bx + 17, row_y + 10], fill=CHART_COLOURS[n % len(CHART_COLOURS)])
            draw.text((bx + 22, row_y), name, font=tick_font, fill="black")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode("ascii")


@functools.cache
def _font(size: int) -> Any:
    return ImageFont.load_default(size=size)


def _tick_step(span: float) -> float:
    """A round step (1, 2, 2.5 or 5 times a power of ten) that cuts ``span`` into about five."""
    power = 10 ** math.floor(math.log10(span / 5))
    return next(power * m for m in (1, 2, 2.5, 5, 10) if span / (power * m) <= 6)


def _round_up(value: float, step: float) -> float:
    return math.ceil(value / step - 1e-9) * step if value > 0 else 0.0


def _turned(text: str, font: Any, degrees: int) -> Any:
    """``text`` drawn black on a transparent image turned ``degrees`` counter-clockwise."""
    box = font.getbbox(text)
    flat = Image.new("LA", (max(box[2], 1) + 2, max(box[3], 1) + 2), (0, 0))
    ImageDraw.Draw(flat).text((1, 1), text, font=font, fill=(0, 255))
    return flat.rotate(degrees, expand=True, resample=Image.Resampling.BICUBIC)


# ---------------------------------------------------------------- receipts and invoices (finance)

def _fonts(*sizes: int) -> list[Any]:
    return [_font(size) for size in sizes]


def _scan(rng: random.Random, image: Any, levels: int = 4) -> Any:
    """Make a clean drawing look scanned: specks, a slight tilt, softness, few grey levels."""
    draw = ImageDraw.Draw(image)
    for _ in range(image.width * image.height // 900):
        x, y = rng.randrange(image.width), rng.randrange(image.height)
        draw.point((x, y), fill=rng.randrange(110, 200))
    tilted = image.rotate(rng.uniform(-1.6, 1.6), resample=Image.Resampling.BILINEAR, expand=True, fillcolor=205)
    step = 256 // levels
    return tilted.filter(ImageFilter.GaussianBlur(0.6)).point([v // step * step + step // 2 for v in range(256)])


def receipt_png(rng: random.Random, merchant: str, city: str, date: dt.date, clock: str,
                 items: list[tuple[str, float]], total: float, money: str, rate: float) -> bytes:
    big, body, small = _fonts(21, 15, 13)
    width, height = 360, 330 + 24 * len(items)
    image = Image.new("L", (width, height), 247)
    draw = ImageDraw.Draw(image)
    draw.text((width // 2, 28), merchant.upper(), font=big, fill=25, anchor="mm")
    draw.text((width // 2, 54), city, font=small, fill=60, anchor="mm")
    draw.text((22, 84), f"{date.isoformat()}  {clock}", font=small, fill=50)
    draw.text((width - 22, 84), f"No. {rng.randint(1000, 99999)}", font=small, fill=50, anchor="ra")
    y = 112
    dashes = lambda y: [draw.line((x, y, x + 5, y), fill=90) for x in range(22, width - 22, 9)]
    dashes(y + 8)
    for item, amount in items:
        y += 24
        draw.text((22, y), item[:30], font=body, fill=35)
        draw.text((width - 22, y), f"{amount:.2f}", font=body, fill=35, anchor="ra")
    y += 30
    dashes(y + 8)
    draw.text((22, y + 22), f"TOTAL {money}", font=big, fill=15)
    draw.text((width - 22, y + 22), f"{total:.2f}", font=big, fill=15, anchor="ra")
    vat = total - total / (1 + rate)
    draw.text((22, y + 56), f"incl. VAT {rate * 100:.0f}%", font=small, fill=60)
    draw.text((width - 22, y + 56), f"{vat:.2f}", font=small, fill=60, anchor="ra")
    draw.text((22, y + 84), f"CARD **** {rng.randint(1000, 9999)}", font=small, fill=60)
    draw.text((width // 2, height - 30), "Thank you for your visit", font=small, fill=70, anchor="mm")
    buffer = io.BytesIO()
    _scan(rng, image).save(buffer, "PNG")
    return buffer.getvalue()


def invoice_pdf(rng: random.Random, world: dict[str, Any], vendor: dict[str, Any], ident: str, issue: dt.date,
                 due: dt.date, project: str | None, lines: list[dict[str, Any]], subtotal: float, tax: float,
                 money: str, rate: float) -> bytes:
    title, head, body = _fonts(34, 20, 16)
    width, height = 827, 1170
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    draw.text((60, 60), vendor["name"], font=title, fill=0)
    draw.text((60, 108), f"{vendor['city']}, {vendor['country']}  -  accounts@{vendor['domain']}", font=body, fill=0)
    draw.text((width - 60, 60), "INVOICE", font=title, fill=0, anchor="ra")
    company = world["company"]
    facts = [("Invoice no.", ident), ("Issued", issue.isoformat()), ("Due", due.isoformat()),
             ("Your reference", project or "-")]
    for n, (label, value) in enumerate(facts):
        draw.text((60, 180 + n * 28), label, font=body, fill=0)
        draw.text((240, 180 + n * 28), value, font=body, fill=0)
    draw.text((480, 180), "Bill to", font=body, fill=0)
    draw.text((480, 208), company["name"], font=head, fill=0)
    draw.text((480, 238), f"{company['city']}, {company['country']}", font=body, fill=0)
    y = 340
    for x, label, anchor in ((60, "Description", "la"), (500, "Qty", "ra"), (630, "Unit price", "ra"),
                             (767, "Amount", "ra")):
        draw.text((x, y), label, font=head, fill=0, anchor=anchor)
    draw.line((60, y + 32, 767, y + 32), fill=0, width=2)
    for line in lines:
        y += 44
        draw.text((60, y), line["description"][:40], font=body, fill=0)
        draw.text((500, y), f"{line['quantity']:g}", font=body, fill=0, anchor="ra")
        draw.text((630, y), f"{line['unit_price']:.2f}", font=body, fill=0, anchor="ra")
        draw.text((767, y), f"{line['amount']:.2f}", font=body, fill=0, anchor="ra")
    y += 60
    draw.line((420, y, 767, y), fill=0, width=1)
    for label, value in (("Subtotal", subtotal), (f"VAT {rate * 100:.0f}%", tax), (f"Total {money}", subtotal + tax)):
        y += 34
        draw.text((440, y), label, font=head if label.startswith("Total") else body, fill=0)
        draw.text((767, y), f"{value:.2f}", font=head if label.startswith("Total") else body, fill=0, anchor="ra")
    draw.text((60, height - 120), f"Payment within {(due - issue).days} days of the invoice date.", font=body, fill=0)
    draw.text((60, height - 92), f"Please quote {ident} with your payment.", font=body, fill=0)
    for _ in range(rng.randint(30, 80)):  # dust on the scanner glass
        x, y = rng.randrange(width), rng.randrange(height)
        draw.point((x, y), fill=0)
    buffer = io.BytesIO()
    stamp = dt.datetime(issue.year, issue.month, issue.day, 9, 0).timetuple()  # never the wall clock
    image.rotate(rng.uniform(-0.8, 0.8), expand=False, fillcolor=255).convert("1", dither=Image.Dither.NONE).save(
        buffer, "PDF", resolution=100, title=f"Invoice {ident}", author=vendor["name"], creationDate=stamp,
        modDate=stamp)
    return buffer.getvalue()
