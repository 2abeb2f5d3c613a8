"""Figure: memory per GPU against data-parallel degree per stage (plan.json from zb_plan)."""

import gbjson
import figstyle as fs

LAYOUT = ("tp", "pp", "ep")  # other parallel degrees; they split lines only when they vary


def check(path, doc):
    """Raises InputError unless doc has the shape zb_plan writes."""
    if not (isinstance(doc, dict) and isinstance(doc.get("rows"), list)
            and all(isinstance(r, dict) for r in doc["rows"])):
        raise gbjson.InputError(f"{path}: not a zb_plan file (no 'rows' list of objects)")


def _num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and fs.finite(v)


def memory(doc, outdir):
    rows = [r for r in doc["rows"]
            if isinstance(r.get("stage"), str) and _num(r.get("dp")) and r["dp"] > 0
            and _num(r.get("gb_per_gpu"))]
    if not rows:
        raise fs.NoData("no row with stage, dp and gb_per_gpu")
    split = [k for k in LAYOUT if len({r.get(k) for r in rows}) > 1]
    series, rank = {}, fs.first_seen(r["stage"] for r in rows)
    for r in rows:
        name = " ".join([r["stage"]] + [f"{k}:{r.get(k)}" for k in split])
        series.setdefault((rank[r["stage"]], name), []).append(r)

    fig, ax = fs.new_figure()
    out, xs, ys = [], [], []
    for i, ((_, name), members) in enumerate(sorted(series.items())):
        members.sort(key=lambda r: r["dp"])
        x = [r["dp"] for r in members]
        y = [r["gb_per_gpu"] for r in members]
        ax.plot(x, y, label=name, **fs.line_style(i))
        xs += x
        ys += y
        out += [[name, r["stage"], r["dp"]] + [r.get(k, "") for k in LAYOUT]
                + [r["gb_per_gpu"]] for r in members]
    fs.log2_axis(ax, "x", xs, fs.plain_formatter())
    if len(set(xs)) <= 8:
        ax.set_xticks(sorted(set(xs)))  # the degrees zb_plan was asked about
    positive = [y for y in ys if y > 0]
    if positive and max(positive) / min(positive) > 50:
        # Sharded stages fall as 1/N; a linear axis would flatten them to zero.
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(fs.plain_formatter())
        zero = [f"{r['stage']} at N = {r['dp']:g}" for r in rows if r["gb_per_gpu"] <= 0]
        if zero:  # a log axis has no place for them: said, not silently dropped (the CSV keeps them)
            fs.say(f"note: figure plan_memory: not drawn on its log axis (0 GB or less): {', '.join(zero)}")
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel("data-parallel degree N (log2)")
    ax.set_ylabel("memory per GPU (GB)")
    model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    if _num(model.get("params")):
        ax.set_title(f"model of {fs.count_text(model['params'])} parameters")
    ax.legend()
    return fs.save(fig, outdir, "plan_memory",
                   ["series", "stage", "dp"] + list(LAYOUT) + ["gb_per_gpu"], out)
