"""Small SVG charts for the benchmark report, standard library only (no plotting
package is needed on the machines that run `make bench`)."""

import math
from xml.sax.saxutils import escape

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1"]
FONT = 'font-family="sans-serif" font-size="12"'


def _text(x, y, s, anchor="start", size=12, weight="normal", rotate=None):
    tr = f' transform="rotate({rotate} {x:.1f} {y:.1f})"' if rotate is not None else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" '
            f'font-weight="{weight}"{tr}>{escape(s)}</text>')


def _svg(width, height, body, title):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" {FONT}>\n'
            f'<rect width="100%" height="100%" fill="white"/>\n'
            + _text(width / 2, 20, title, "middle", 14, "bold") + "\n"
            + "\n".join(body) + "\n</svg>\n")


def _nice_max(v):
    if v <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * e >= v:
            return m * e
    return 10 * e


def hbar_groups(title, xlabel, labels, series, path, ref=None, note=None):
    """Horizontal grouped bars. labels: row names; series: [(name, [value or None],
    [err or None])]; None values are drawn as 'n/a'. ref: x of a dashed reference line."""
    n_series = max(len(series), 1)
    bar_h = 12
    group_h = bar_h * n_series + 10
    left, right, top = 230, 90, 50
    legend_h = 20 * ((n_series + 2) // 3) + 10
    height = top + group_h * len(labels) + 40 + legend_h + (20 if note else 0)
    width = 860
    plot_w = width - left - right
    vmax = max([v + (e or 0) for _, vals, errs in series
                for v, e in zip(vals, errs or [None] * len(vals)) if v is not None] + [ref or 0])
    vmax = _nice_max(vmax)
    body = []
    plot_bottom = top + group_h * len(labels)
    for i in range(6):
        x = left + plot_w * i / 5
        body.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{plot_bottom}" '
                    f'stroke="#ddd"/>')
        body.append(_text(x, plot_bottom + 15, f"{vmax * i / 5:g}", "middle", 11))
    body.append(_text(left + plot_w / 2, plot_bottom + 32, xlabel, "middle"))
    for gi, label in enumerate(labels):
        y0 = top + gi * group_h + 5
        body.append(_text(left - 8, y0 + group_h / 2, label, "end", 11))
        for si, (_, vals, errs) in enumerate(series):
            v = vals[gi]
            y = y0 + si * bar_h
            if v is None:
                body.append(_text(left + 4, y + bar_h - 3, "n/a", "start", 10))
                continue
            w = plot_w * v / vmax
            body.append(f'<rect x="{left}" y="{y:.1f}" width="{w:.1f}" height="{bar_h - 2}" '
                        f'fill="{PALETTE[si % len(PALETTE)]}"/>')
            e = errs[gi] if errs else None
            if e:
                x1, x2 = left + plot_w * max(v - e, 0) / vmax, left + plot_w * (v + e) / vmax
                ym = y + (bar_h - 2) / 2
                body.append(f'<line x1="{x1:.1f}" y1="{ym:.1f}" x2="{x2:.1f}" y2="{ym:.1f}" '
                            f'stroke="black"/>')
            body.append(_text(left + w + 4 + (plot_w * e / vmax if e else 0), y + bar_h - 3,
                              f"{v:.3g}", "start", 10))
    if ref is not None:
        x = left + plot_w * ref / vmax
        body.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{plot_bottom}" '
                    f'stroke="black" stroke-dasharray="4 3"/>')
    ly = plot_bottom + 50
    for si, (name, _, _) in enumerate(series):
        lx = left + (si % 3) * 200
        yy = ly + (si // 3) * 20
        body.append(f'<rect x="{lx}" y="{yy - 10}" width="12" height="12" '
                    f'fill="{PALETTE[si % len(PALETTE)]}"/>')
        body.append(_text(lx + 18, yy, name))
    if note:
        body.append(_text(10, height - 8, note, "start", 10))
    with open(path, "w") as f:
        f.write(_svg(width, height, body, title))


def loglog_lines(title, xlabel, ylabel, series, path, note=None):
    """Lines on log-log axes. series: [(name, [(x, y)])] with x, y > 0."""
    pts = [p for _, s in series for p in s if p[0] > 0 and p[1] > 0]
    width, height = 640, 420
    left, right, top, bottom = 70, 170, 40, 60
    plot_w, plot_h = width - left - right, height - top - bottom
    body = []
    if not pts:
        body.append(_text(width / 2, height / 2, "no data", "middle"))
        with open(path, "w") as f:
            f.write(_svg(width, height, body, title))
        return
    xlo = math.floor(math.log10(min(p[0] for p in pts)))
    xhi = math.ceil(math.log10(max(p[0] for p in pts)))
    ylo = math.floor(math.log10(min(p[1] for p in pts)))
    yhi = math.ceil(math.log10(max(p[1] for p in pts)))
    xhi, yhi = max(xhi, xlo + 1), max(yhi, ylo + 1)

    def px(x):
        return left + plot_w * (math.log10(x) - xlo) / (xhi - xlo)

    def py(y):
        return top + plot_h * (1 - (math.log10(y) - ylo) / (yhi - ylo))

    for d in range(xlo, xhi + 1):
        x = px(10 ** d)
        body.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" '
                    f'stroke="#ddd"/>')
        body.append(_text(x, top + plot_h + 15, f"{10 ** d:g}", "middle", 11))
    for d in range(ylo, yhi + 1):
        y = py(10 ** d)
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
                    f'stroke="#ddd"/>')
        body.append(_text(left - 5, y + 4, f"{10 ** d:g}", "end", 11))
    body.append(_text(left + plot_w / 2, height - bottom + 35, xlabel, "middle"))
    body.append(_text(15, top + plot_h / 2, ylabel, "middle", rotate=-90))
    for si, (name, s) in enumerate(series):
        s = [p for p in s if p[0] > 0 and p[1] > 0]
        color = PALETTE[si % len(PALETTE)]
        if len(s) > 1:
            d = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s)
            body.append(f'<polyline points="{d}" fill="none" stroke="{color}" '
                        f'stroke-width="2"/>')
        for x, y in s:
            body.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{color}"/>')
        ly = top + 10 + si * 20
        body.append(f'<rect x="{left + plot_w + 15}" y="{ly - 10}" width="12" height="12" '
                    f'fill="{color}"/>')
        body.append(_text(left + plot_w + 33, ly, name))
    if note:
        body.append(_text(10, height - 8, note, "start", 10))
    with open(path, "w") as f:
        f.write(_svg(width, height, body, title))
