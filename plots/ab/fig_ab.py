"""A/B figure: per results file, each timed metric's median worsening with its interval."""

import figstyle
import matplotlib.pyplot as plt
from matplotlib.ticker import FixedLocator, NullFormatter

# Marker per verdict, so that the verdict reads without colour.
STYLE = {
    "REGRESSION": {"marker": "s", "color": "#D55E00", "markerfacecolor": "#D55E00"},
    "worse (not gated)": {"marker": "s", "color": "#D55E00", "markerfacecolor": "white"},
    "improved": {"marker": "^", "color": "#0072B2", "markerfacecolor": "white"},
    "too noisy": {"marker": "x", "color": "0.45", "markerfacecolor": "0.45"},
    "ok": {"marker": "o", "color": "#000000", "markerfacecolor": "white"},
}
ROW_IN = 0.11  # height per metric
TICKS = [0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0]
WIDE_TICKS = [0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0]
CLIP = 8.0


def _label(row, constant):
    segs = [s for s in row.benchmark.split("/") if s not in constant]
    metric = "real_time_s" if row.metric == "real_time" else row.metric
    return f"{' '.join(segs)} · {metric}"


def _worse(row, value):
    """B/A turned so that > 1 means B is worse: B/A for a time, A/B for a rate."""
    return 1.0 / value if row.kind == "higher" else value


def ratios(rows, outdir, stem, threshold):
    """One forest plot of the decided timed rows of one results file; raises NoData if none."""
    drawn = [r for r in rows if r.verdict in STYLE and figstyle.finite(r.ratio, r.low, r.high)]
    if not drawn:
        raise figstyle.NoData("no timed metric with a ratio")
    segs = [set(r.benchmark.split("/")) for r in drawn]
    constant = set.intersection(*segs) - {drawn[0].benchmark.split("/")[0]}
    # Two columns wide: the labels are long, and this figure is read, not printed. Laid out
    # at the resolution it is saved at, or the longest labels lose their first letter.
    fig, ax = plt.subplots(figsize=(2 * figstyle.WIDTH_IN, 0.7 + ROW_IN * len(drawn)), dpi=300)
    table = []
    for y, r in enumerate(reversed(drawn)):
        mid = _worse(r, r.ratio)
        lo, hi = sorted((_worse(r, r.low), _worse(r, r.high)))
        ax.errorbar([mid], [y], xerr=[[mid - lo], [hi - mid]], linestyle="none",
                    capsize=1.5, elinewidth=0.6, markersize=3, **STYLE[r.verdict])
        table.append([r.benchmark, r.metric, r.kind, mid, lo, hi, r.verdict])
    ax.axvline(1.0, color="black", linewidth=0.6)
    for x in (1.0 + threshold, 1.0 / (1.0 + threshold)):
        ax.axvline(x, color="0.4", linewidth=0.5, linestyle="--")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(figstyle.plain_formatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_yticks(range(len(drawn)))
    ax.set_yticklabels([_label(r, constant) for r in reversed(drawn)])
    ax.tick_params(axis="y", labelsize=4.5)
    ax.set_ylim(-0.7, len(drawn) - 0.3)
    ax.set_xlabel("B worse by (×): time B/A, rate A/B; median and interval over pairs "
                  f"(axis clipped at 1/{CLIP:g} and {CLIP:g})")
    ax.grid(axis="y", linewidth=0.2)
    for verdict, style in STYLE.items():
        if any(r.verdict == verdict for r in drawn):
            ax.plot([], [], linestyle="none", label=verdict, **style)
    ax.legend(loc="lower right", fontsize=5, frameon=True)
    # Shared machines give intervals of 100x; past CLIP the bar runs off the axis, which
    # says enough, and keeps the interesting range around 1 readable.
    lo_end = max(min([t[4] for t in table] + [1 / (1 + threshold)]) / 1.05, 1 / CLIP)
    hi_end = min(max([t[5] for t in table] + [1 + threshold]) * 1.05, CLIP)
    ax.set_xlim(lo_end, hi_end)
    wide = hi_end / lo_end > 4
    ax.xaxis.set_major_locator(FixedLocator(WIDE_TICKS if wide else TICKS))
    header = ["benchmark", "metric", "kind", "worse_median", "worse_low", "worse_high", "verdict"]
    return figstyle.save(fig, outdir, stem, header, list(reversed(table)))
