"""Figure of zb_predict's quantized configurations: each one's predicted step against the rate
of the links between nodes, beside its stage unquantized, with the rate below which it is
faster marked (predict_quantized.json: --link-gbps over several rates).

Every number drawn is a counter the C++ wrote; the CSV beside the figure holds them.
"""

from matplotlib.ticker import LogLocator, NullFormatter

import gbjson
import figstyle as fs
import stage_table


def crossing(runs, outdir):
    """quantized_crossing: step_s_predicted against link_gbps (log axis), one line per
    configuration; a dotted mark in its colour where each quantized one starts to beat its
    stage unquantized (beats_unquantized_below_gbps: zpp is weighed against hpz)."""
    picks = [p for p in gbjson.representative(runs).values()
             if "stage" in p.params and fs.finite(p.value("link_gbps"), p.value("step_s_predicted"))]
    if not any(fs.finite(p.value("beats_unquantized_below_gbps")) for p in picks):
        raise fs.NoData("no quantized configuration predicted at several link rates")
    series = {}
    for p in picks:
        series.setdefault(stage_table.config_label(p.params), []).append(p)
    fig, ax = fs.new_figure()
    # Readable at a column's width: the stages unquantized, each single quantization of the
    # others, and zpp (hpz with both); every configuration is in the CSV, its `drawn` column
    # saying which are on the figure.
    shown = [(k, v) for k, v in series.items() if k.count("+") <= 1 and not k.startswith("hpz+")]
    drawn = {k for k, _ in shown}
    rows, ys = [], []
    for name, members in series.items():
        members.sort(key=lambda p: p.value("link_gbps"))
        rows += [[p.name, name, int(name in drawn), p.value("link_gbps"), p.value("step_s_predicted"),
                  p.value("quantize_s_predicted"), p.value("beats_unquantized_below_gbps")] for p in members]
    for i, (name, members) in enumerate(shown):
        x = [p.value("link_gbps") for p in members]
        y = [p.value("step_s_predicted") for p in members]
        style = fs.line_style(i)
        ax.plot(x, y, label=name, **style)
        ys += y
        cross = members[0].value("beats_unquantized_below_gbps")
        if fs.finite(cross) and min(x) <= cross <= max(x):
            ax.axvline(cross, color=style["color"], linewidth=0.7, linestyle=":")
    ax.set_xscale("log")
    unit = fs.time_axis(ax.yaxis, ys)
    ax.set_xlabel("links between nodes (Gbit/s)")
    ax.set_ylabel(f"predicted step ({unit})")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # 0.5, 1, 2, 5, 10
    ax.xaxis.set_major_formatter(fs.plain_formatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.legend(fontsize=5, ncol=2)
    return fs.save(fig, outdir, "quantized_crossing",
                   ["benchmark", "configuration", "drawn", "link_gbps", "step_s_predicted",
                    "quantize_s_predicted", "beats_unquantized_below_gbps"], rows)
