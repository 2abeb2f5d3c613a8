"""Figure: bus bandwidth of each collective against message size (collectives.json)."""

import gbjson
import figstyle as fs

OP_ORDER = ["all_reduce", "reduce_scatter", "all_gather"]


def _size(pick):
    """Message size in bytes: the C++ counter, else the name's bytes:N segment."""
    v = pick.value("bytes")
    if fs.finite(v):
        return v
    n = gbjson.number(pick.params.get("bytes"))
    return n if n is not None else float("nan")


def _op_rank(op):
    return (OP_ORDER.index(op) if op in OP_ORDER else len(OP_ORDER), op)


def busbw(runs, outdir):
    picks = [p for p in gbjson.representative(runs).values()
             if fs.finite(p.value("busbw_GBps"), _size(p)) and _size(p) > 0]
    if not picks:
        raise fs.NoData("no benchmark with busbw_GBps and a message size")
    keys = fs.varying(picks, exclude=("bytes",))
    series = {}
    for p in picks:
        series.setdefault((_op_rank(p.family), fs.label(p, keys, p.family)), []).append(p)

    fig, ax = fs.new_figure()
    rows, xs, gaps = [], [], []
    sizes = sorted({_size(p) for p in picks})

    def steps_of(ps):
        x = sorted(_size(p) for p in ps)
        return sorted(b / a for a, b in zip(x, x[1:]))
    every_step = sorted(r for members in series.values() for r in steps_of(members))
    for i, ((_, name), members) in enumerate(sorted(series.items())):
        members.sort(key=_size)
        x = [_size(p) for p in members]
        y = [p.value("busbw_GBps") for p in members]
        # A step between two sizes wider than the series' own (its median step; with one step,
        # the file's) is a size it lacks (its benchmark failed, or wrote no bandwidth): the line
        # breaks there rather than bridge it, at the sizes the other series have there, else
        # halfway.
        steps = steps_of(members)
        steps = steps if len(steps) >= 2 else every_step
        usual = steps[(len(steps) - 1) // 2] if steps else 1.0
        missing = []
        for a, b in zip(x, x[1:]):
            if b / a > 1.5 * usual:
                missing += [s for s in sizes if a < s < b] or [(a * b) ** 0.5]
        gaps += [f"{name} at {fs.bytes_text(s)}" for s in missing]
        line = sorted(list(zip(x, y)) + [(s, float("nan")) for s in missing])
        ax.plot([a for a, _ in line], [b for _, b in line], label=name, **fs.line_style(i))
        spread = fs.band(ax, x, members, "busbw_GBps", i)
        xs += x
        rows += [[p.name, name, _size(p), p.value("busbw_GBps"), lo, hi, p.repetitions]
                 for p, (lo, hi) in zip(members, spread)]
    if gaps:
        fs.say(f"note: figure collectives_busbw: no point, the line broken, for {', '.join(gaps)}")
    fs.log2_axis(ax, "x", xs, fs.bytes_formatter())
    ax.set_xlabel("message size (bytes, log2)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_ylim(bottom=0)
    ranks = {p.value("ranks") for p in picks}
    title = [f"{int(next(iter(ranks)))} ranks"] if len(ranks) == 1 and fs.finite(*ranks) else []
    title += [fs.repetitions_note(picks)] if fs.repetitions_note(picks) else []
    ax.set_title("; ".join(title))
    ax.legend()
    return fs.save(fig, outdir, "collectives_busbw",
                   ["benchmark", "series", "bytes", "busbw_GBps", "busbw_GBps_min",
                    "busbw_GBps_max", "repetitions"], rows)
