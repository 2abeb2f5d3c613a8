"""Figure: volume and gradient memory against micro-batches per stage (zb_pipeline JSON).

Lines are the formulas as the C++ wrote them for each M (volume_psi_formula,
grad_bytes_per_param_formula); points are what was measured there (volume_psi_measured at
the sockets; grad_bytes_per_param_measured). A volume no socket measured is drawn from the
harness's own books (volume_psi_accounted) as a hollow point, labelled "accounted": it sits on
the formula by construction and must not read as a measurement agreeing with it.
"""

import matplotlib.pyplot as plt

import gbjson
import figstyle as fs


def _series(runs):
    """{stage: [pick, ...] sorted by M} for benchmarks with the needed counters."""
    out = {}
    for p in gbjson.representative(runs).values():
        m = gbjson.number(p.params.get("microbatches"))
        if p.family != "pipeline" or "stage" not in p.params or m is None:
            continue
        if not fs.finite(p.value("volume_psi_accounted"), p.value("volume_psi_formula"),
                         p.value("grad_bytes_per_param_measured"), p.value("grad_bytes_per_param_formula")):
            continue
        out.setdefault(p.params["stage"], []).append((m, p))
    if not out:
        raise fs.NoData("no pipeline benchmark with volumes and gradient memory")
    # Strategies in the order the results name them (the stage table's, zbplot sees to it).
    return {s: sorted(v, key=lambda t: t[0]) for s, v in out.items()}


def microbatches(runs, outdir):
    series = _series(runs)
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(fs.WIDTH_IN, 3.6))
    rows, ms = [], []
    for i, (stage, members) in enumerate(series.items()):
        style = fs.line_style(i)
        x = [m for m, _ in members]
        ms += x
        vol_f = [p.value("volume_psi_formula") for _, p in members]
        grad_f = [p.value("grad_bytes_per_param_formula") for _, p in members]
        measured = [(p.value("volume_psi_measured"), "sockets") if fs.finite(p.value("volume_psi_measured"))
                    else (p.value("volume_psi_accounted"), "accounted") for _, p in members]
        grad_m = [p.value("grad_bytes_per_param_measured") for _, p in members]
        line = dict(color=style["color"], linestyle=style["linestyle"])
        top.plot(x, vol_f, label=f"{stage} formula", **line)
        legend = {}
        for how, word, face in (("sockets", "measured", style["color"]), ("accounted", "accounted", "none")):
            at = [(xi, v) for xi, (v, h) in zip(x, measured) if h == how]
            if at:
                legend[how] = f"{stage} {word}"
                top.plot([xi for xi, _ in at], [v for _, v in at], linestyle="none", marker=style["marker"],
                         color=style["color"], markerfacecolor=face, label=legend[how])
        bottom.plot(x, grad_f, **line)
        bottom.plot(x, grad_m, linestyle="none", marker=style["marker"], color=style["color"])
        for (m, p), vf, (vm, how), gf, gm in zip(members, vol_f, measured, grad_f, grad_m):
            rows.append([p.name, stage, m, vf, vm, how, legend[how], gf, gm])
    fs.log2_axis(bottom, "x", ms, fs.plain_formatter())
    bottom.set_xticks(sorted(set(ms)))
    bottom.set_xlabel("micro-batches per step M (log2)")
    top.set_ylabel("volume per step (Ψ)")
    bottom.set_ylabel("grad bytes/param")
    for ax in (top, bottom):
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(fs.plain_formatter())
    fig.align_ylabels((top, bottom))
    # Laid out here and again in fs.save: with two panels the first pass leaves the y labels
    # past the left edge.
    fig.tight_layout(pad=0.3)
    top.legend(ncol=2)
    return fs.save(fig, outdir, "pipeline_microbatches",
                   ["benchmark", "stage", "microbatches", "volume_psi_formula", "volume_psi_drawn",
                    "volume_source", "volume_legend", "grad_bytes_per_param_formula",
                    "grad_bytes_per_param_measured"], rows)
