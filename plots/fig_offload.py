"""Figures of zb_offload: exposed copy time against compute per chunk per slot count
(offload_sweep.json), and device bytes per parameter, measured and formula (offload.json).

Every number drawn is a counter the C++ wrote; the CSV beside each figure holds them.
"""

import statistics

from matplotlib.ticker import NullFormatter

import gbjson
import figstyle as fs


def _slots(p):
    """The slot count from the name (slots:S), else from the counter."""
    s = gbjson.number(p.params.get("slots"))
    return s if s is not None else p.value("slots")


def _series(picks, lead):
    """{(slots, label): [pick, ...]}: one series per slot count, split further only by the
    parameters that vary other than the slots and the swept compute."""
    keys = fs.varying(picks, exclude=[k for p in picks for k in p.params
                                      if k == "slots" or k.startswith("compute")])
    out = {}
    for p in picks:
        s = _slots(p)
        out.setdefault((s, fs.label(p, keys, lead(p, s))), []).append(p)
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0], kv[0][1])))


def exposed(runs, outdir):
    """offload_exposed: exposed copy time against compute per chunk, one line per slot count;
    the median of the benchmarks' hide conditions (hide_condition_s) dotted."""
    picks = [p for p in gbjson.representative(runs).values()
             if p.family == "offload_grads"
             and fs.finite(p.value("compute_per_chunk_s"), p.value("exposed_copy_s"), _slots(p))]
    if not picks:
        raise fs.NoData("no offload_grads benchmark with compute_per_chunk_s and exposed_copy_s")
    series = _series(picks, lambda p, s: f"{s:g} slot" + ("" if s == 1 else "s"))
    fig, ax = fs.new_figure()
    rows, xs, ys = [], [], []
    for i, ((slots, name), members) in enumerate(series.items()):
        members = sorted(members, key=lambda p: p.value("compute_per_chunk_s"))
        x = [p.value("compute_per_chunk_s") for p in members]
        style = fs.line_style(i)
        ax.plot(x, [p.value("exposed_copy_s") for p in members], label=name, **style)
        spread = fs.band(ax, x, members, "exposed_copy_s", i)
        # Every benchmark measures its own condition, and it depends on the slots: one mark per
        # line, in its colour, at the lower middle of its benchmarks' (a value one of them
        # measured), each benchmark's own in the CSV beside the mark drawn.
        hides = [p.value("hide_condition_s") for p in members if fs.finite(p.value("hide_condition_s"))]
        mark = statistics.median_low(hides) if hides else None
        if mark is not None:
            ax.axvline(mark, color=style["color"], linewidth=0.8, linestyle=":")
            xs.append(mark)
        for p, (lo, hi) in zip(members, spread):
            xs.append(p.value("compute_per_chunk_s"))
            ys += [p.value("exposed_copy_s"), hi]
            rows.append([p.name, name, slots, p.value("compute_per_chunk_s"), p.value("exposed_copy_s"),
                         lo, hi, _or_none(p.value("hide_condition_s")), mark, _or_none(p.value("hidden_frac")),
                         p.repetitions])
    distinct = sorted(set(xs))
    sizable = [x for x in distinct if x >= distinct[-1] / 1000]
    if len(sizable) < len(distinct) and len(sizable) >= 2:
        # A sweep from "no compute" (a few ns measured) would stretch a log axis over decades
        # with nothing in them: linear up to the first sizable value, logarithmic above.
        ax.set_xscale("symlog", linthresh=sizable[0], linscale=0.5)
        ax.set_xlim(left=0)  # no compute time below zero: the symlog axis would show one
        ax.xaxis.set_minor_formatter(NullFormatter())
        axis_note = ", log past the first"
    elif distinct[0] > 0 and distinct[-1] / distinct[0] >= 10:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        axis_note = ", log"
    else:
        axis_note = ""
    unit = fs.time_axis(ax.xaxis, xs)
    # Two lines: on one, the label is wider than a column.
    ax.set_xlabel(f"compute per chunk ({unit}{axis_note})\ndotted: each line's hide condition")
    unit = fs.time_axis(ax.yaxis, ys)
    ax.set_ylabel(f"exposed copy time per step ({unit})")
    ax.set_ylim(bottom=0)
    ax.set_title(fs.repetitions_note(picks))
    ax.legend()
    return fs.save(fig, outdir, "offload_exposed",
                   ["benchmark", "series", "slots", "compute_per_chunk_s", "exposed_copy_s",
                    "exposed_copy_s_min", "exposed_copy_s_max", "hide_condition_s", "hide_condition_drawn_s",
                    "hidden_frac", "repetitions"], rows)


def _or_none(v):
    return v if fs.finite(v) else None


FAMILIES = ("offload_grads", "offload_weights")


def memory(runs, outdir):
    """offload_memory: device bytes per parameter against slots, the formula as lines and what
    was measured as points, for offload_grads and offload_weights."""
    picks = [p for p in gbjson.representative(runs).values()
             if p.family in FAMILIES and fs.finite(_slots(p), p.value("device_bytes_per_param_measured"),
                                                    p.value("device_bytes_per_param_formula"))]
    if not picks:
        raise fs.NoData("no offload_grads or offload_weights benchmark with device bytes per parameter")
    # The two families name different parameters, so what splits a line is what varies within one.
    keys = {f: fs.varying([p for p in picks if p.family == f],
                          exclude=[k for p in picks for k in p.params if k == "slots" or k.startswith("compute")])
            for f in FAMILIES}
    series = {}
    for p in picks:
        name = fs.label(p, keys[p.family], p.family.replace("offload_", ""))
        series.setdefault((FAMILIES.index(p.family), name), []).append(p)
    fig, ax = fs.new_figure()
    rows, xs = [], []
    for i, ((_, name), members) in enumerate(sorted(series.items())):
        members = sorted(members, key=_slots)
        x = [_slots(p) for p in members]
        xs += x
        style = fs.line_style(i)
        ax.plot(x, [p.value("device_bytes_per_param_formula") for p in members], color=style["color"],
                linestyle=style["linestyle"], label=f"{name} formula")
        ax.plot(x, [p.value("device_bytes_per_param_measured") for p in members], linestyle="none",
                marker=style["marker"], color=style["color"], label=f"{name} measured")
        spread = fs.band(ax, x, members, "device_bytes_per_param_measured", i)
        for p, (lo, hi) in zip(members, spread):
            rows.append([p.name, name, p.family, _slots(p), p.value("device_bytes_per_param_formula"),
                         p.value("device_bytes_per_param_measured"), lo, hi,
                         _or_none(p.value("host_bytes_per_param_measured")), p.repetitions])
    ax.set_xticks(sorted(set(xs)))
    ax.xaxis.set_major_formatter(fs.plain_formatter())
    ax.set_xlabel("device slots")
    ax.set_ylabel("device bytes per parameter")
    ax.yaxis.set_major_formatter(fs.plain_formatter())
    ax.set_ylim(bottom=0)
    ax.set_xlim(min(xs) - 0.5, max(xs) + 0.5)
    ax.set_title(fs.repetitions_note(picks))
    ax.legend(ncol=2 if len(series) > 1 else 1)
    return fs.save(fig, outdir, "offload_memory",
                   ["benchmark", "series", "family", "slots", "device_bytes_per_param_formula",
                    "device_bytes_per_param_measured", "device_bytes_per_param_measured_min",
                    "device_bytes_per_param_measured_max", "host_bytes_per_param_measured", "repetitions"], rows)

