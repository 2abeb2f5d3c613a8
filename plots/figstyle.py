"""Shared look of every figure (one column, greyscale-safe) and the PNG+PDF+CSV writer, which
says when a text reaches past the figure's edge."""

import csv
import math
import os

import matplotlib

matplotlib.use("Agg")  # files only; no display on CI machines
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

WIDTH_IN = 3.5  # one column of a two-column paper
HEIGHT_IN = 2.4

matplotlib.rcParams.update({
    "font.size": 7, "axes.titlesize": 7, "axes.labelsize": 7, "legend.fontsize": 6,
    "xtick.labelsize": 6, "ytick.labelsize": 6, "lines.linewidth": 1.0,
    "lines.markersize": 3.5, "axes.grid": True, "grid.linewidth": 0.4, "grid.alpha": 0.5,
    "legend.frameon": False, "pdf.fonttype": 42, "ps.fonttype": 42,
})

# Okabe-Ito colours for screens, but every series also differs in marker and
# line style so that a greyscale print still tells them apart.
COLORS = ["#000000", "#E69F00", "#0072B2", "#009E73", "#D55E00", "#CC79A7", "#56B4E9"]
MARKERS = ["o", "s", "^", "D", "v", "x", "+"]
LINESTYLES = ["-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 2)), (0, (8, 2))]

# Bars: grey levels and hatches, so the fill pattern alone identifies a series.
BAR_FACES = ["0.85", "white", "0.55", "white", "0.35"]
BAR_HATCHES = ["", "////", "", "xxxx", "...."]


class NoData(Exception):
    """The input holds nothing this figure can draw; the figure is skipped."""


def line_style(i):
    """Keyword arguments for the i-th line series."""
    return {"color": COLORS[i % len(COLORS)], "marker": MARKERS[i % len(MARKERS)],
            "linestyle": LINESTYLES[i % len(LINESTYLES)]}


def bar_style(i):
    """Keyword arguments for the i-th bar series."""
    return {"color": BAR_FACES[i % len(BAR_FACES)], "hatch": BAR_HATCHES[i % len(BAR_HATCHES)],
            "edgecolor": "black", "linewidth": 0.6}


def new_figure(height=HEIGHT_IN):
    fig, ax = plt.subplots(figsize=(WIDTH_IN, height))
    return fig, ax


def first_seen(stages):
    """{stage: where the input first names it}: a sort key that keeps the results' own order,
    which zbplot puts in the stage table's order when the file carries one."""
    out = {}
    for s in stages:
        out.setdefault(s, len(out))
    return out


def finite(*values):
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def varying(picks, exclude=()):
    """Name parameters whose value differs between benchmarks: the ones a label needs."""
    keys = []
    for p in picks:
        keys += [k for k in p.params if k not in keys and k not in exclude]
    return [k for k in keys if len({p.params.get(k) for p in picks}) > 1]


def label(pick, keys, lead=""):
    parts = [lead] if lead else []
    parts += [f"{k}:{pick.params[k]}" if pick.params.get(k) else k
              for k in keys if k in pick.params]
    return " ".join(parts) or pick.name


def _binary(value, units):
    for i in range(len(units) - 1, -1, -1):
        scale = 1024.0 ** i
        if abs(value) >= scale:
            return f"{value / scale:g} {units[i]}"
    return f"{value:g} {units[0]}"


def bytes_text(v):
    """4096 -> "4 KiB", as the byte axes' ticks read."""
    return _binary(v, ["B", "KiB", "MiB", "GiB", "TiB"])


def bytes_formatter():
    """Tick labels such as 4 KiB, 16 MiB, 1 GiB."""
    return FuncFormatter(lambda v, _: bytes_text(v))


def count_text(n):
    """7e9 -> "7B", 1.3e8 -> "130M": parameter counts the way papers write them."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:.3g}"


def plain_formatter():
    """Tick labels as plain numbers (1, 8, 64) instead of powers."""
    return FuncFormatter(lambda v, _: f"{v:g}")


TIME_UNITS = [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")]


def time_axis(axis, values):
    """Labels a seconds axis in s, ms, µs or ns; the data stay in seconds, as in the JSON.

    Returns the unit name for the axis label.
    """
    top = max((abs(v) for v in values if finite(v)), default=1.0)
    scale, unit = next(((s, u) for s, u in TIME_UNITS if top >= s), TIME_UNITS[-1])
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / scale:g}"))
    return unit


def repetitions_note(picks):
    """"median of 5 repetitions, bars min-max" for a title, or "" for single runs."""
    reps = sorted({p.repetitions for p in picks})
    if reps[-1] <= 1:
        return ""
    count = str(reps[0]) if len(reps) == 1 else f"{reps[0]}-{reps[-1]}"
    return f"median of {count} repetitions, min-max shaded"


def band(ax, x, picks, metric, i):
    """Shades the min-max spread of `metric` over repetitions behind series i; returns the
    (low, high) pairs, the same numbers the CSV records."""
    spread = [p.spread(metric) for p in picks]
    if any(p.repetitions > 1 for p in picks):
        ax.fill_between(x, [lo for lo, _ in spread], [hi for _, hi in spread],
                        color=COLORS[i % len(COLORS)], alpha=0.18, linewidth=0)
    return spread


def _cell(v):
    if v is None:
        return ""  # not drawn (NaN in the input)
    if isinstance(v, float):
        return repr(v)  # round-trips exactly, so the CSV equals the JSON
    return str(v)


def cut_texts(fig, renderer=None):
    """The texts of a laid-out figure that reach past its edge, named by their text (or by
    their axis, for tick labels); [] when everything fits in the frame. renderer: one that has
    just drawn the figure; without it, the figure is drawn here."""
    if renderer is None:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
    edge = fig.bbox

    def past(box):  # one pixel of slack for rounding
        return box is not None and (box.x0 < edge.x0 - 1 or box.y0 < edge.y0 - 1
                                    or box.x1 > edge.x1 + 1 or box.y1 > edge.y1 + 1)
    out = []
    texts = list(fig.texts) + [t for leg in fig.legends for t in leg.get_texts()]
    for ax in fig.axes:
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        if ax.get_legend() is not None:
            texts += ax.get_legend().get_texts()
        # Only the ticks drawn: the axis' tight box leaves out those beyond the view limits.
        out += [f"{name} tick labels" for name, axis in (("x", ax.xaxis), ("y", ax.yaxis))
                if axis.get_visible() and past(axis.get_tightbbox(renderer))
                and not past(axis.label.get_window_extent(renderer))]
    out += [repr(t.get_text()) for t in texts
            if t.get_visible() and t.get_text().strip() and past(t.get_window_extent(renderer))]
    return out


# Where labels_apart tries a label, in points from its point and the text's alignment: beside it
# above and below, right then left, then further up and down on the right.
_SPOTS = ([(3, 3, "left", "bottom"), (3, -3, "left", "top"), (-3, 3, "right", "bottom"), (-3, -3, "right", "top")]
          + [(3, 3 + 6 * k, "left", "bottom") for k in range(1, 6)]
          + [(3, -3 - 6 * k, "left", "top") for k in range(1, 6)])


def labels_apart(ax, labels, fontsize=5, marker_pt=3.0):
    """Annotates each (text, x, y) beside its point, a label that would cover another point's
    marker (`marker_pt` points each way), the legend or a label placed before it moved to the
    next free spot around its point (_SPOTS; the first where none is free). Points whose markers
    overlap, directly or through others, share one label ("z3, hsdp"), each name once. Call it
    once the axes' limits are set: it lays the figure out as save() will, and the labels take no
    part in a later layout, which would move the points under them."""
    fig = ax.figure
    fig.tight_layout(pad=0.3)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    half = renderer.points_to_pixels(marker_pt)
    at = ax.transData.transform([(x, y) for _, x, y in labels]) if labels else []
    # Groups of points whose markers overlap (union-find over every close pair), in input order.
    group = list(range(len(labels)))

    def root(i):
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i
    for i in range(len(labels)):
        for j in range(i + 1, len(labels)):
            if math.dist(at[i], at[j]) < 2 * half:
                group[max(root(i), root(j))] = min(root(i), root(j))
    members = {}
    for i in range(len(labels)):
        members.setdefault(root(i), []).append(i)
    markers = [Bbox.from_extents(px - half, py - half, px + half, py + half) for px, py in at]
    legend = ax.get_legend()
    placed = [legend.get_window_extent(renderer)] if legend is not None else []
    for first, mine in members.items():
        text = ", ".join(dict.fromkeys(labels[i][0] for i in mine))
        _, x, y = labels[first]
        others = placed + [markers[i] for i in range(len(labels)) if i not in mine]
        def put(spot):
            dx, dy, ha, va = spot
            note = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), ha=ha, va=va,
                               fontsize=fontsize)
            return note, note.get_window_extent(renderer)

        for spot in _SPOTS:
            note, box = put(spot)
            if not any(box.overlaps(b) for b in others):
                break
            note.remove()
        else:
            note, box = put(_SPOTS[0])
        note.set_in_layout(False)
        placed.append(box)


def overlapping_texts(fig):
    """The pairs of texts drawn inside a figure's axes (annotations) that cover each other."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = [t for ax in fig.axes for t in ax.texts if t.get_visible() and t.get_text().strip()]
    boxes = [t.get_window_extent(renderer) for t in texts]
    return [(texts[i].get_text(), texts[j].get_text()) for i in range(len(texts)) for j in range(i + 1, len(texts))
            if boxes[i].overlaps(boxes[j])]


# What drawing a figure has to say beside it ("warning: ..." or "note: ..." lines): kept here
# rather than printed, since a figure may be drawn in another process, and zbplot prints them
# with the figure's own line.
NOTES = []


def say(line):
    NOTES.append(line)


def save(fig, outdir, stem, header, rows):
    """Writes stem.png, stem.pdf and stem.csv (the numbers drawn); returns the paths. A text
    past the figure's edge is drawn anyway and named in NOTES: a figure to fix."""
    os.makedirs(outdir, exist_ok=True)
    fig.tight_layout(pad=0.3)
    cut = []
    # Measured while the PNG is drawn, at its resolution, rather than drawing once more.
    listening = fig.canvas.mpl_connect("draw_event", lambda e: cut.extend(cut_texts(fig, e.renderer)))
    paths = []
    for ext in ("png", "pdf"):
        path = os.path.join(outdir, f"{stem}.{ext}")
        fig.savefig(path, dpi=300, metadata={"CreationDate": None} if ext == "pdf" else None)
        fig.canvas.mpl_disconnect(listening)
        paths.append(path)
    if cut:  # a save may draw more than once: each text named once
        say(f"warning: figure {stem}: text past its edge: {', '.join(dict.fromkeys(cut))}")
    plt.close(fig)
    path = os.path.join(outdir, f"{stem}.csv")
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows([_cell(v) for v in row] for row in rows)
    paths.append(path)
    return paths


def log2_axis(ax, which, values, formatter=None, max_ticks=6):
    """Base-2 log scale on "x" or "y", ticks on whole powers of two, thinned to stay readable."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log", base=2)
    pos = [v for v in values if finite(v) and v > 0]
    if not pos:
        return
    lo, hi = math.floor(math.log2(min(pos))), math.ceil(math.log2(max(pos)))
    step = max(1, math.ceil((hi - lo + 1) / max_ticks))
    axis.set_ticks([2.0 ** e for e in range(lo, hi + 1, step)])
    axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    if formatter is not None:
        axis.set_major_formatter(formatter)
