"""Figure: optimizer kernel bandwidth against parameters, with the memory limit (optimizer.json)."""

import gbjson
import figstyle as fs


def _params(pick):
    """Parameter count: the C++ counter, else the name's params:N segment."""
    v = pick.value("params")
    if fs.finite(v):
        return v
    n = gbjson.number(pick.params.get("params"))
    return n if n is not None else float("nan")


def bandwidth(runs, outdir):
    picks = [p for p in gbjson.representative(runs).values()
             if p.has("GBps") and fs.finite(p.value("GBps"), _params(p)) and _params(p) > 0]
    if not picks:
        raise fs.NoData("no kernel benchmark with GBps and params")
    keys = fs.varying(picks, exclude=("params",))
    series = {}
    for p in picks:
        series.setdefault(fs.label(p, keys, p.family), []).append(p)

    fig, ax = fs.new_figure()
    rows, xs, limits = [], [], []
    for i, (name, members) in enumerate(sorted(series.items())):
        members.sort(key=_params)
        x = [_params(p) for p in members]
        ax.plot(x, [p.value("GBps") for p in members], label=name, **fs.line_style(i))
        spread = fs.band(ax, x, members, "GBps", i)
        xs += x
        lim = [(_params(p), p.value("limit_GBps")) for p in members
               if fs.finite(p.value("limit_GBps"))]
        if lim and lim not in [pts for _, pts in limits]:
            limits.append((name, lim))
        rows += [[p.name, name, _params(p), p.value("GBps"), lo, hi, p.repetitions,
                  _drawn(p.value("limit_GBps"))] for p, (lo, hi) in zip(members, spread)]
    values = {y for _, lim in limits for _, y in lim}
    if len(values) == 1:
        # One machine limit for every kernel: a single horizontal line.
        ax.axhline(next(iter(values)), color="0.3", linewidth=0.9, linestyle="--", label="limit")
    for j, (name, lim) in enumerate(limits if len(values) > 1 else []):
        ax.plot([x for x, _ in lim], [y for _, y in lim], color="0.3", linewidth=0.9,
                linestyle="--", marker=fs.MARKERS[j % len(fs.MARKERS)],
                markerfacecolor="none", label=f"limit ({name})")
    fs.log2_axis(ax, "x", xs)
    ax.set_xlabel("parameters (log2)")
    ax.set_ylabel("memory bandwidth (GB/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(fs.repetitions_note(picks))
    ax.legend()
    return fs.save(fig, outdir, "optimizer_bandwidth",
                   ["benchmark", "series", "params", "GBps", "GBps_min", "GBps_max", "repetitions",
                    "limit_GBps"], rows)


def _drawn(v):
    return v if fs.finite(v) else None
