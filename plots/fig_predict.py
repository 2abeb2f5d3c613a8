"""Figure: each stage's predicted time against its measured one (predict.json from zb_predict)."""

import gbjson
import figstyle as fs

# (predicted counter, measured counter, marker label): what zb_predict holds against zero.json.
PAIRS = [("comm_s_predicted", "comm_s_measured", "communication"),
         ("exposed_comm_s_predicted", "exposed_comm_s_measured", "exposed communication")]


def predicted_vs_measured(runs, outdir):
    picks = [p for p in gbjson.representative(runs).values() if "stage" in p.params]
    points = [(p, pred, meas, label) for p in picks for pred, meas, label in PAIRS
              if fs.finite(p.value(pred), p.value(meas))]
    if not points:
        raise fs.NoData("no stage with a prediction and the measurement it was held against")
    rank = fs.first_seen(t[0].params["stage"] for t in points)
    points.sort(key=lambda t: (rank[t[0].params["stage"]], t[3]))
    fig, ax = fs.new_figure()
    values, rows, labels = [], [], []
    for i, (_, _, label) in enumerate(PAIRS):
        mine = [t for t in points if t[3] == label]
        if not mine:
            continue
        xs = [t[0].value(t[2]) for t in mine]
        ys = [t[0].value(t[1]) for t in mine]
        style = fs.line_style(i)
        ax.scatter(xs, ys, marker=style["marker"], color=style["color"], label=label, zorder=3)
        labels += [(p.params["stage"], x, y) for (p, _, _, _), x, y in zip(mine, xs, ys)]
        values += xs + ys
        rows += [[p.name, label, p.params["stage"], p.value(meas), p.value(pred)]
                 for (p, pred, meas, _) in mine]
    top = max(values) * 1.1
    # The diagonal: where a perfect prediction lies.
    ax.plot([0, top], [0, top], color="0.4", linewidth=0.8, linestyle="--", label="predicted = measured")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    unit = fs.time_axis(ax.xaxis, values)
    fs.time_axis(ax.yaxis, values)
    ax.set_xlabel(f"measured per step ({unit})")
    ax.set_ylabel(f"predicted per step ({unit})")
    ax.legend()
    fs.labels_apart(ax, labels)  # stages predicted alike share a point: their names must not
    return fs.save(fig, outdir, "predict_vs_measured",
                   ["benchmark", "series", "stage", "measured_s", "predicted_s"], rows)
