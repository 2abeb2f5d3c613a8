"""Figure: timeline of compute and communication spans per rank (Chrome trace, trace*.json); a
wait split by cause shows its part waiting for a late rank apart from its part on the wire."""

import matplotlib.patches as mpatches
from matplotlib.ticker import FuncFormatter

import gbjson
import figstyle as fs

# Greyscale-safe looks per track kind: the hatch alone tells them apart.
LOOK = {
    "compute": {"facecolors": "0.75", "hatch": ""},
    "comm": {"facecolors": "white", "hatch": "////"},
    "wait": {"facecolors": "0.15", "hatch": ""},
    "skew": {"facecolors": "0.55", "hatch": "xxxx"},
    "other": {"facecolors": "0.4", "hatch": "...."},
}
# Past this many spans the bars are a few pixels wide, hatches vanish and
# drawing them takes minutes; grey levels alone keep the kinds apart then.
DENSE = 2000
LOOK_DENSE = {
    "compute": {"facecolors": "0.7", "hatch": ""},
    "comm": {"facecolors": "0.1", "hatch": ""},
    "wait": {"facecolors": "0.3", "hatch": ""},
    "skew": {"facecolors": "0.55", "hatch": ""},
    "other": {"facecolors": "0.45", "hatch": ""},
}
LEGEND = {"compute": "compute", "comm": "communication", "wait": "compute waits (exposed)",
          "skew": "waits for a late rank", "other": "other"}
# With late-rank parts beside them, the other waits are those for the wire.
LEGEND_SPLIT = dict(LEGEND, wait="waits for the wire")
SHORT = {"compute": "compute", "comm": "comm", "wait": "waits"}


def check(path, doc):
    """Raises InputError unless doc is a Chrome trace (object with traceEvents, or an array)."""
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise gbjson.InputError(f"{path}: not a Chrome trace (no 'traceEvents' list)")


def _events(doc):
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    return [e for e in events if isinstance(e, dict)]


def _num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and fs.finite(v)


def _key(track):
    # Ranks are usually integers; anything else sorts after them by its text.
    return tuple((0, v, "") if _num(v) else (1, 0, str(v)) for v in track)


def _kind(tid, thread_name):
    text = (thread_name or "").lower()
    if "wait" in text:
        return "wait"
    if "comm" in text:
        return "comm"
    if "compute" in text:
        return "compute"
    return {0: "compute", 1: "comm", 2: "wait"}.get(tid, "other")


def step_note(doc, timed=None):
    """A line saying how typical the step drawn is: its exposed time (its slowest rank's, as the
    timed steps count theirs: the trace's per-rank exposed_us) beside the timed steps' (`timed`:
    seconds, from the results file the step was timed in: the median and the lowest and highest
    of its repetitions, each itself the median of its steps); "" where the trace gives no
    exposed time."""
    ranks = [(e.get("args") or {}).get("exposed_us") for e in _events(doc)
             if e.get("ph") == "M" and e.get("name") == "process_name"]
    ranks = [v for v in ranks if _num(v)]
    if not ranks:
        return ""
    note = f"exposed: this step {max(ranks) / 1e3:.2f} ms"
    if timed and all(_num(v) for v in timed):
        median, lo, hi = (v * 1e3 for v in timed)
        note += f", timed steps {median:.2f} ms"
        if lo < hi:  # a line of its own: one column's width
            note += f"\n(their repetitions {lo:.2f} to {hi:.2f} ms)"
    return note


def timeline(doc, outdir, stem="timeline", timed=None):
    """The figure; `timed`: (median, lowest, highest) seconds of the timed steps' exposed time,
    to say beside the step drawn (step_note)."""
    events = _events(doc)
    names = {(e.get("pid"), e.get("tid")): (e.get("args") or {}).get("name")
             for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"
             and isinstance(e.get("args"), dict)}
    spans = [e for e in events if e.get("ph") == "X" and _num(e.get("ts"))
             and _num(e.get("dur")) and e["dur"] >= 0]
    if not spans:
        raise fs.NoData("no complete ('X') events with ts and dur")
    tracks = sorted({(e.get("pid"), e.get("tid")) for e in spans}, key=_key)

    look = LOOK_DENSE if len(spans) > DENSE else LOOK
    fig, ax = fs.new_figure(height=min(6.0, 0.9 + 0.22 * len(tracks)))
    # Bars are drawn from the first event on, in the axis' unit, so that ticks fall on round
    # times; the CSV keeps the trace's own microsecond timestamps.
    t0 = min(e["ts"] for e in spans)
    span_us = max(e["ts"] + e["dur"] for e in spans) - t0
    scale, unit = (1e6, "s") if span_us >= 1e6 else (1e3, "ms") if span_us >= 1e3 else (1, "µs")
    rows, kinds, labels = [], set(), []
    for y, track in enumerate(tracks):
        kind = _kind(track[1], names.get(track))
        kinds.add(kind)
        mine = sorted((e for e in spans if (e.get("pid"), e.get("tid")) == track),
                      key=lambda e: e["ts"])
        # A wait's part before its collective's last rank issued it (zb_zero's "skew" part).
        part = {id(e): "skew" if kind == "wait" and (e.get("args") or {}).get("part") == "skew" else kind
                for e in mine}
        # Row 0 at the top, the way trace viewers show rank 0 first.
        for k in dict.fromkeys(part.values()):
            kinds.add(k)
            ax.broken_barh([((e["ts"] - t0) / scale, e["dur"] / scale) for e in mine if part[id(e)] == k],
                           (-y - 0.4, 0.8), edgecolor="black",
                           linewidth=0.3 if look is LOOK else 0, **look[k])
        # Short labels: at one column width long thread names crowd out the plot.
        short = SHORT.get(kind) or names.get(track) or kind
        labels.append(f"rank {track[0]} {short}")
        rows += [[e.get("pid"), e.get("tid"), part[id(e)], e.get("name", ""), e["ts"], e["dur"]]
                 for e in mine]
    ax.set_yticks([-y for y in range(len(tracks))])
    ax.set_yticklabels(labels)
    ax.grid(axis="y", visible=False)
    ax.set_xlim(0, max(span_us, 1) * 1.01 / scale)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    note = step_note(doc, timed)
    ax.set_xlabel(f"time since first event ({unit})" + (f"\n{note}" if note else ""))
    legend = LEGEND_SPLIT if "skew" in kinds else LEGEND
    handles = [mpatches.Patch(facecolor=look[k]["facecolors"], hatch=look[k]["hatch"],
                              edgecolor="black", linewidth=0.3, label=legend[k])
               for k in ("compute", "comm", "wait", "skew", "other") if k in kinds]
    # Three entries side by side are wider than one column: two per row above the plot.
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0),
              ncol=min(len(handles), 2), borderaxespad=0.2)
    return fs.save(fig, outdir, stem, ["pid", "tid", "track", "name", "ts_us", "dur_us"], rows)
