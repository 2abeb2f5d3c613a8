"""Figures of one training step per ZeRO stage (zero.json): memory, volume, step time."""

from matplotlib.ticker import EngFormatter

import gbjson
import figstyle as fs


def _stages(runs, stem, *needed):
    """Benchmarks with a stage and finite values for the needed metrics, in stage order. A stage
    left out (its benchmark stopped with an error, or a needed value is not a number) is named
    beside the figure (figstyle.NOTES): a figure a stage is missing from says so rather than close up around it."""
    every = list(gbjson.representative(runs).values())
    picks = [p for p in every if "stage" in p.params and fs.finite(*[p.value(m) for m in needed])]
    out = [f"{p.params['stage']} ({', '.join(m for m in needed if not fs.finite(p.value(m)))} not a number)"
           for p in every if "stage" in p.params and p not in picks]
    out += [f"{r.params['stage']} (its benchmark stopped with an error)"
            for r in runs if r.error and "stage" in r.params]
    if out:
        fs.say(f"note: figure {stem}: left out: {', '.join(dict.fromkeys(out))}")
    if not picks:
        raise fs.NoData(f"no stage benchmark with {', '.join(needed)}")
    rank = fs.first_seen(p.params["stage"] for p in picks)
    picks.sort(key=lambda p: (rank[p.params["stage"]], p.name))
    keys = fs.varying(picks, exclude=("stage",))
    labels = [fs.label(p, keys, p.params["stage"]) for p in picks]
    return picks, labels


def _categories(ax, labels):
    ax.set_xticks(range(len(labels)))
    long = any(len(t) > 6 for t in labels)
    ax.set_xticklabels(labels, rotation=30 if long else 0, ha="right" if long else "center")
    ax.set_xlabel("ZeRO stage")
    ax.grid(axis="x", visible=False)


def _drawn(v):
    return v if fs.finite(v) else None


def bytes_per_param(runs, outdir):
    picks, labels = _stages(runs, "zero_bytes_per_param", "bytes_per_param_measured")
    fig, ax = fs.new_figure()
    measured = [p.value("bytes_per_param_measured") for p in picks]
    formula = [p.value("bytes_per_param_formula") for p in picks]
    ax.bar(range(len(picks)), measured, width=0.6, label="measured", **fs.bar_style(0))
    marked = False
    for i, f in enumerate(formula):
        if fs.finite(f):
            # A short thick tick across the bar: the formula should sit on its top.
            ax.hlines(f, i - 0.38, i + 0.38, colors="black", linestyles="--", linewidth=1.4,
                      label=None if marked else "formula", zorder=3)
            marked = True
    _categories(ax, labels)
    ax.set_ylabel("resident bytes per parameter (B)")
    ax.set_ylim(bottom=0)
    ax.legend()
    rows = [[p.name, t, m, _drawn(f)] for p, t, m, f in zip(picks, labels, measured, formula)]
    return fs.save(fig, outdir, "zero_bytes_per_param",
                   ["benchmark", "bar", "bytes_per_param_measured", "bytes_per_param_formula"],
                   rows)


def volume(runs, outdir):
    picks, labels = _stages(runs, "zero_volume", "volume_psi_accounted")
    fig, ax = fs.new_figure()
    accounted = [p.value("volume_psi_accounted") for p in picks]
    measured = [p.value("volume_psi_measured") for p in picks]
    xs = range(len(picks))
    ax.bar([x - 0.2 for x in xs], accounted, width=0.4, label="accounted", **fs.bar_style(0))
    shown = [(x + 0.2, m) for x, m in zip(xs, measured) if fs.finite(m)]
    if shown:
        ax.bar([x for x, _ in shown], [m for _, m in shown], width=0.4, label="measured",
               **fs.bar_style(1))
    _categories(ax, labels)
    ax.set_ylabel("communication volume per rank (Ψ)")
    ax.set_ylim(bottom=0)
    ax.legend()
    rows = [[p.name, t, v, _drawn(m)] for p, t, v, m in zip(picks, labels, accounted, measured)]
    return fs.save(fig, outdir, "zero_volume",
                   ["benchmark", "bar", "volume_psi_accounted", "volume_psi_measured"], rows)


def step_time(runs, outdir):
    """Each stage's median step as one bar, the step the summary names, and its parts as that
    repetition measured them: compute alone, the exposed communication (compute's measured
    waits) and the rest of the step, which neither of them holds (issuing the collectives,
    compute slowed by the communication beside it, the step against compute's fastest; none
    where the two already exceed the step, whose bar then stands above it, each part as
    measured). Parts taken each at its own median would come from different repetitions and
    need not add up to any step. Of an even count of repetitions the lower middle one is drawn,
    where summary.md gives the mean of the middle two. The step's spread over repetitions as
    error bars at the step."""
    picks, labels = _stages(runs, "zero_step_time", "step_s", "compute_s", "exposed_comm_s")
    fig, ax = fs.new_figure()
    at = [p.at_median("step_s", "compute_s", "exposed_comm_s") for p in picks]
    step, compute, exposed = ([t[i] for t in at] for i in range(3))
    rest = [max(0.0, s - c - e) for s, c, e in zip(step, compute, exposed)]
    xs = range(len(picks))
    ax.bar(xs, compute, width=0.6, label="compute", **fs.bar_style(0))
    ax.bar(xs, exposed, width=0.6, bottom=compute, label="exposed communication", **fs.bar_style(1))
    ax.bar(xs, rest, width=0.6, bottom=[c + e for c, e in zip(compute, exposed)],
           label="rest of the step", **fs.bar_style(2))
    spread = [p.spread("step_s") for p in picks]
    if any(p.repetitions > 1 for p in picks):
        ax.errorbar(xs, step, yerr=[[s - lo for s, (lo, _) in zip(step, spread)],
                                    [hi - s for s, (_, hi) in zip(step, spread)]],
                    fmt="none", ecolor="black", elinewidth=0.7, capsize=2)
    _categories(ax, labels)
    tops = [max(hi, c + e) for (_, hi), c, e in zip(spread, compute, exposed)]
    unit = fs.time_axis(ax.yaxis, tops)
    ax.set_ylabel(f"time per step ({unit})")
    ax.set_ylim(bottom=0)
    ax.set_title(fs.repetitions_note(picks).replace("shaded", "as bars"))
    ax.legend()
    rows = [[p.name, t, s, c, e, r, lo, hi, p.repetitions]
            for p, t, s, c, e, r, (lo, hi) in zip(picks, labels, step, compute, exposed, rest, spread)]
    return fs.save(fig, outdir, "zero_step_time",
                   ["benchmark", "bar", "step_s", "compute_s", "exposed_comm_s", "rest_s", "step_s_min",
                    "step_s_max", "repetitions"], rows)


def inter_node_bytes(runs, outdir):
    """Bytes the busiest node sends to other nodes per step, per stage: accounted (rings over
    the logged collectives) and the node link's counter. Nothing crosses on one node, so that
    draws nothing."""
    picks, labels = _stages(runs, "zero_inter_node_bytes", "inter_node_bytes_accounted")
    if not any(p.value("nodes") > 1 for p in picks):
        raise fs.NoData("one node: no inter-node traffic to draw")
    fig, ax = fs.new_figure()
    accounted = [p.value("inter_node_bytes_accounted") for p in picks]
    measured = [p.value("inter_node_bytes_measured") for p in picks]
    xs = range(len(picks))
    ax.bar([x - 0.2 for x in xs], accounted, width=0.4, label="accounted (ring)", **fs.bar_style(0))
    shown = [(x + 0.2, m) for x, m in zip(xs, measured) if fs.finite(m)]
    if shown:
        ax.bar([x for x, _ in shown], [m for _, m in shown], width=0.4,
               label="measured (node link)", **fs.bar_style(1))
    _categories(ax, labels)
    ax.yaxis.set_major_formatter(EngFormatter(unit="B"))  # decimal: 6 MB, as the table
    ax.set_ylabel("inter-node bytes per step, busiest node")
    ax.set_ylim(bottom=0)
    nodes, per = picks[0].value("nodes"), picks[0].value("ranks_per_node")
    if fs.finite(nodes, per):
        ax.set_title(f"{nodes:g} nodes x {per:g} ranks")
    ax.legend()
    rows = [[p.name, t, i, _drawn(m), p.value("nodes"), p.value("ranks_per_node")]
            for p, t, i, m in zip(picks, labels, accounted, measured)]
    return fs.save(fig, outdir, "zero_inter_node_bytes",
                   ["benchmark", "bar", "inter_node_bytes_accounted", "inter_node_bytes_measured",
                    "nodes", "ranks_per_node"], rows)
