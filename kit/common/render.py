"""HTML tables and SVG line plots for notebooks, with nothing but the standard library.

Kernels of old releases have no pandas or matplotlib; IPython's ``HTML`` and
``SVG`` display these strings.
"""

from xml.sax.saxutils import escape

_PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
_STATUS_COLOURS = {
    "saved": "#d8f0d8",
    "exists": "#e8e8e8",
    "unsupported": "#fff3cd",
    "failed": "#f8d0d0",
    "identical": "#c8ecc8",
    "close": "#e0f4e0",
    "drift": "#ffe0b0",
    "mismatch": "#f8c0c0",
    "load-error": "#f0a8a8",
    "infer-error": "#f0a8a8",
    "corrupt": "#d8a0d8",
    "past tolerance": "#f8c0c0",
    "shape changed": "#f0a8a8",
}


def html_table(rows, columns, colour_by=None):
    """An HTML table of ``rows`` (dicts) showing ``columns``; rows tinted by their ``colour_by`` value."""
    out = ['<table style="border-collapse:collapse;font-size:12px">', "<tr>"]
    out.extend(
        '<th style="text-align:left;padding:2px 8px;border-bottom:1px solid #888">%s</th>' % escape(c) for c in columns
    )
    out.append("</tr>")
    for row in rows:
        colour = _STATUS_COLOURS.get(row.get(colour_by), "") if colour_by else ""
        out.append('<tr style="background:%s">' % colour)
        for c in columns:
            value = row.get(c)
            if isinstance(value, float):
                value = "%.4g" % value
            out.append('<td style="padding:2px 8px">%s</td>' % escape("" if value is None else str(value)))
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def svg_lines(series, title="", xlabel="", ylabel="", width=640, height=320, ylog=False):
    """An SVG line plot of ``series`` (name -> list of y values, x = index), with a legend.

    With ``ylog`` the y axis is log10 (values must be positive) and ticks read 1e-6 etc.
    """
    import math

    left, right, top, bottom = 56, 140, 28, 40
    pw, ph = width - left - right, height - top - bottom
    if ylog:
        series = dict((k, [math.log10(v) for v in ys]) for k, ys in series.items())
    values = [v for ys in series.values() for v in ys]
    if not values:
        return (
            '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="40"><text x="4" y="20">%s: no data'
            "</text></svg>" % (width, escape(title))
        )
    lo, hi = min(values), max(values)
    hi = hi if hi > lo else lo + 1.0
    longest = max(len(ys) for ys in series.values())

    def sx(i):
        return left + pw * (i / float(max(1, longest - 1)))

    def sy(v):
        return top + ph * (1 - (v - lo) / (hi - lo))

    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
        'font-size="11">' % (width, height),
        '<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>' % (left, top, pw, ph),
        '<text x="%d" y="16" font-size="13">%s</text>' % (left, escape(title)),
        '<text x="%d" y="%d">%s</text>' % (left + pw // 2 - 20, height - 8, escape(xlabel)),
        '<text x="12" y="%d" transform="rotate(-90 12 %d)">%s</text>'
        % (top + ph // 2 + 20, top + ph // 2, escape(ylabel)),
    ]
    for frac in (0.0, 0.5, 1.0):
        v = lo + (hi - lo) * frac
        label = ("1e%+.1f" % v) if ylog else ("%.3g" % v)
        parts.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (left - 4, sy(v) + 4, label))
    parts.append(
        '<text x="%d" y="%d">0</text><text x="%d" y="%d" text-anchor="end">%d</text>'
        % (left, top + ph + 14, left + pw, top + ph + 14, longest - 1)
    )
    for k, (name, ys) in enumerate(sorted(series.items())):
        colour = _PALETTE[k % len(_PALETTE)]
        points = " ".join("%.1f,%.1f" % (sx(i), sy(v)) for i, v in enumerate(ys))
        parts.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>' % (colour, points))
        ly = top + 14 * (k + 1)
        parts.append(
            '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>'
            % (left + pw + 10, ly - 4, left + pw + 28, ly - 4, colour)
        )
        parts.append('<text x="%d" y="%d">%s</text>' % (left + pw + 32, ly, escape(name)))
    parts.append("</svg>")
    return "".join(parts)
