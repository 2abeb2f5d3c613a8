"""Figure: exposed communication against the compute/communication ratio (zero_sweep.json)."""

import math

from matplotlib.ticker import LogLocator, NullFormatter

import gbjson
import figstyle as fs


def exposed_vs_ratio(runs, outdir):
    picks = [p for p in gbjson.representative(runs).values()
             if "stage" in p.params
             and fs.finite(p.value("compute_s"), p.value("comm_s"), p.value("exposed_comm_s"))
             and p.value("compute_s") > 0 and p.value("comm_s") > 0]
    if not picks:
        raise fs.NoData("no stage benchmark with positive compute_s and comm_s")
    # The swept compute amount is the x axis, so it must not split the lines.
    keys = fs.varying(picks, exclude=[k for p in picks for k in p.params
                                      if k == "stage" or k.startswith("compute")])
    series, rank = {}, fs.first_seen(p.params["stage"] for p in picks)
    for p in picks:
        name = fs.label(p, keys, p.params["stage"])
        series.setdefault((rank[p.params["stage"]], name), []).append(p)

    fig, ax = fs.new_figure()
    rows, xs, ys = [], [], []
    for i, ((_, name), members) in enumerate(sorted(series.items())):
        # The ratio is only where the point sits on the x axis: each repetition's own, their
        # median (a ratio of two medians can be one no repetition had); both inputs go to the
        # CSV as the C++ wrote them.
        pts = sorted(((p.median_of(lambda c, m: c / m, "compute_s", "comm_s"), p) for p in members),
                     key=lambda t: t[0])
        ax.plot([x for x, _ in pts], [p.value("exposed_comm_s") for _, p in pts],
                label=name, **fs.line_style(i))
        spread = fs.band(ax, [x for x, _ in pts], [p for _, p in pts], "exposed_comm_s", i)
        for (x, p), (lo, hi) in zip(pts, spread):
            xs.append(x)
            ys += [p.value("exposed_comm_s"), hi]
            rows.append([p.name, name, p.value("compute_s"), p.value("comm_s"), x,
                         p.value("exposed_comm_s"), lo, hi, p.repetitions])
    ax.set_xscale("log")
    # Plain ratios (0.5, 1, 2) read better than powers of ten; 1-2-5 steps
    # only while the sweep spans few enough decades to leave them room.
    decades = math.log10(max(xs) / min(xs))
    subs = (1.0, 2.0, 5.0) if decades <= 2 else (1.0,)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.xaxis.set_major_formatter(fs.plain_formatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.axvline(1.0, color="0.4", linewidth=0.6, linestyle=":")
    ax.set_xlabel("compute time / communication time (log)")
    unit = fs.time_axis(ax.yaxis, ys)
    ax.set_ylabel(f"exposed communication per step ({unit})")
    ax.set_ylim(bottom=0)
    ax.set_title(fs.repetitions_note(picks))
    ax.legend()
    return fs.save(fig, outdir, "zero_sweep_exposed",
                   ["benchmark", "series", "compute_s", "comm_s", "compute_over_comm",
                    "exposed_comm_s", "exposed_comm_s_min", "exposed_comm_s_max", "repetitions"], rows)
