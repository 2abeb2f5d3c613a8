#!/usr/bin/env python3
"""Writes RESULTS_DIR/summary.md: first what each stage costs here and which to use, then the
details: the article's table measured, predictions, collectives, sweeps, plan, pipeline, offload.

Only selects, compares and formats values the C++ benchmarks wrote; it measures nothing.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli  # noqa: E402
import gbjson  # noqa: E402
import stage_table  # noqa: E402
import summary_checks  # noqa: E402
from summary_first import first_screen, parse_count  # noqa: E402
from summary_format import (by_stage, count_text, fmt, load, mega, ms, repetitions_line,  # noqa: E402
                            size_text, stage_order, table, timed, value, wrong_cell)
from summary_offload import offload_section  # noqa: E402

OPS = ["all_reduce", "reduce_scatter", "all_gather"]


def zero_section(results):
    zero, wire = load(results, "zero.json"), load(results, "zero_wire.json")
    if zero is None and wire is None:
        return []
    z, w = by_stage(zero), by_stage(wire)
    table_rows, order, note = stage_order(results, ["zero.json", "zero_wire.json"],
                                          list(z.values()) + list(w.values()))
    rows_of = stage_table.by_name(table_rows)
    rows = []
    for stage in order:
        t, v = z.get(stage), w.get(stage)
        if t is None and v is None:
            continue
        mem = t if t is not None else v  # memory: the timed run, else the socket run
        vol = v if v is not None else t  # volumes: the socket run, else the timed run
        row = rows_of.get(stage)
        rows.append([stage, stage_table.article(row), stage_table.collectives_text(row),
                     fmt(value(mem, "bytes_per_param_formula")), fmt(value(mem, "bytes_per_param_measured")),
                     fmt(value(vol, "volume_psi_accounted"), 4), fmt(value(vol, "volume_psi_measured"), 4),
                     mega(value(vol, "inter_node_bytes_accounted")),
                     mega(value(vol, "inter_node_bytes_measured")),
                     timed(t, "step_s", ms), timed(t, "compute_s", ms),
                     timed(t, "exposed_comm_s", ms),
                     timed(t, "overlap_eff", lambda v: fmt(v, 2)),
                     " / ".join(wrong_cell(p) for p in (v, t))])
    head = ["stage", "bytes/param (article)", "collectives", "bytes/param formula",
            "measured", "volume accounted (Ψ)", "measured (Ψ)", "inter-node MB/step accounted",
            "inter-node measured", "step (ms)", "compute (ms)",
            "exposed comm (ms)", "overlap", "wrong (wire / time)"]
    out = ["## ZeRO stages: the article's table, measured", ""]
    first = next(iter((zero or wire).values()), None)
    if first is not None:
        params = [f"{k}:{first.params[k]}" for k in ("params", "layers", "optimizer", "grad")
                  if k in first.params]
        nodes = first.value("nodes")
        where = "" if math.isnan(nodes) else (
            f" on {fmt(nodes, 0)} node(s) of S = {fmt(first.value('ranks_per_node'), 0)}")
        out += [f"Model {', '.join(params)}; N = {fmt(first.value('ranks'), 0)} ranks{where}. Bytes "
                "per parameter: w = 2, g = 2 (BF16) or 4 (FP32), o = 12 (Adam) or 8 (momentum).", ""]
    out += [table(head, rows), ""]
    if note:
        out.append(note)
    out.append("- bytes/param measured: resident-set growth (host) or cudaMemGetInfo (GPU) while "
               "the state is allocated, busiest rank. Step (median), compute, exposed "
               "communication (the time compute waited for it, measured directly) and overlap: "
               "zero.json, fastest transport, with compute.")
    out.append("- inter-node MB/step: what the busiest node sent to other nodes per step; accounted "
               "from rings over each collective's group, measured by the node link's transmit "
               "counter where the launcher names it (tools/cluster.sh), else n/a. 0 on one node.")
    if wire is not None:
        out.append("- volume: zero_wire.json; measured from the bytes written to sockets, ring "
                   "algorithms.")
    else:
        out.append("- volume: zero.json (no socket run: zero_wire.json is absent).")
    return out + [""] + repetitions_line(z.values())


def collectives_section(results):
    picks = load(results, "collectives.json")
    if not picks:
        return []
    best = {}
    for p in picks.values():
        bw = p.value("busbw_GBps")
        if math.isnan(bw):
            continue
        if p.family not in best or bw > best[p.family].value("busbw_GBps"):
            best[p.family] = p
    order = sorted(best, key=lambda op: (OPS.index(op) if op in OPS else len(OPS), op))
    rows = []
    for op in order:
        p = best[op]
        size = gbjson.number(p.params.get("bytes"))
        three = lambda v: fmt(v, 3)  # noqa: E731
        rows.append([op, timed(p, "busbw_GBps", three), timed(p, "algbw_GBps", three),
                     size_text(size) if size is not None else "n/a", p.params.get("dtype", ""),
                     timed(p, "overhead_ratio", three), wrong_cell(p)])
    return ["## Collectives: peak bus bandwidth per op", "",
            table(["op", "peak busbw (GB/s)", "algbw (GB/s)", "at size", "dtype",
                   "overhead (ours / bare call)", "wrong"], rows), ""] + repetitions_line(best.values())


def sweep_section(results):
    picks = load(results, "zero_sweep.json")
    if not picks:
        return []
    rows = []
    _, order, _ = stage_order(results, ["zero_sweep.json"], picks.values())
    keyed = sorted(picks.values(), key=lambda p: (
        stage_table.position(order, p.params.get("stage")),
        gbjson.number(p.params.get("compute_us")) or 0.0))
    for p in keyed:
        rows.append([p.params.get("stage", ""), p.params.get("compute_us", ""),
                     timed(p, "compute_s", ms), timed(p, "comm_s", ms),
                     timed(p, "exposed_comm_s", ms),
                     timed(p, "overlap_eff", lambda v: fmt(v, 2))])
    return ["## Compute sweep: exposed communication", "",
            table(["stage", "compute per layer (µs)", "compute (ms)", "comm (ms)",
                   "exposed comm (ms)", "overlap"], rows), ""] + repetitions_line(picks.values())


def predict_section(results):
    picks = load(results, "predict.json")
    if not picks:
        return []
    rows = []
    stages = by_stage(picks)
    _, order, _ = stage_order(results, ["predict.json"], stages.values())
    for stage in (s for s in order if s in stages):  # zb_predict --stages may name a few; zpp has no replay
        p = stages[stage]
        pct = lambda v: "n/a" if math.isnan(v) else f"{v * 100:+.1f}%"  # noqa: E731
        rows.append([stage, fmt(p.value("collectives"), 0), ms(p.value("comm_s_predicted")),
                     ms(p.value("comm_s_measured")), pct(p.value("comm_error")),
                     ms(p.value("exposed_comm_s_predicted")),
                     ms(p.value("exposed_comm_s_measured")), pct(p.value("exposed_error")),
                     fmt(p.value("exposed_per_comm"), 2), "yes" if p.value("extrapolated") == 1 else "no"])
    return ["## Prediction: each stage from the collective sweep (zb_predict)", "",
            table(["stage", "collectives", "comm predicted (ms)", "measured", "error",
                   "exposed predicted (ms)", "measured", "error", "per comm", "extrapolated"], rows), "",
            "- Predicted from `predict_sweep.json` (each collective timed as the step issues it) "
            "replayed on the step's own schedule; measured: `zero.json`. Error: predicted / "
            "measured - 1, computed by zb_predict. Per comm: how far the predicted exposed time "
            "moves with the collectives' times (`exposed_per_comm`: its relative change per relative "
            "change of theirs; above 1 a small error in them is a larger one in it).", ""]


def quantized_section(results):
    """predict_quantized.json: each quantized configuration's step at the slowest and fastest
    link rates predicted, and the rate below which it beats its stage unquantized."""
    picks = load(results, "predict_quantized.json")
    if not picks:
        return []
    configs = {}
    for p in picks.values():
        if "stage" in p.params and not math.isnan(p.value("link_gbps")):
            configs.setdefault(stage_table.config_label(p.params), []).append(p)
    rows = []
    for label, members in configs.items():
        members.sort(key=lambda p: p.value("link_gbps"))
        lo, hi = members[0], members[-1]
        cross = lo.value("beats_unquantized_below_gbps")
        rows.append([label, ms(lo.value("step_s_predicted")), ms(hi.value("step_s_predicted")),
                     ms(lo.value("quantize_s_predicted")) if lo.has("quantize_s_predicted") else "-",
                     "-" if math.isnan(cross) else fmt(cross, 3)])
    if not rows:
        return []
    rates = sorted({p.value("link_gbps") for members in configs.values() for p in members})
    first = next(iter(picks.values()))
    return ["## Quantized configurations against the link rate (zb_predict)", "",
            table(["configuration", f"step at {rates[0]:g} Gbit/s (ms)", f"step at {rates[-1]:g} Gbit/s (ms)",
                   "quantization kernels (ms)", "beats its stage unquantized below (Gbit/s)"], rows), "",
            f"- Predicted for {fmt(first.value('ranks'), 0)} ranks on {fmt(first.value('nodes'), 0)} nodes from "
            "`predict_sweep.json`, the kernels priced at `quantize_rates.json`'s rates; zpp is weighed "
            "against hpz, the others against their own stage. Figure: "
            "[quantized_crossing](figures/quantized_crossing.png).", ""]


OPT_COLUMNS = [("params", "params", 0), ("params_per_s", "params/s", 4), ("GBps", "GB/s", 2),
               ("limit_GBps", "limit GB/s", 2), ("frac_of_limit", "of limit", 3),
               ("reduce_s", "reduce (ms)", None), ("update_s", "update (ms)", None),
               ("gather_s", "gather (ms)", None), ("step_s", "step (ms)", None)]


def optimizer_section(results):
    picks = load(results, "optimizer.json")
    if not picks:
        return []
    cols = [c for c in OPT_COLUMNS if any(p.has(c[0]) for p in picks.values())]
    rows = []
    for p in picks.values():
        cells = [p.name.split("/iterations:")[0].replace("|", "\\|")]
        for metric, _, digits in cols:
            if digits is None:
                cells.append(timed(p, metric, ms))
            elif metric == "params_per_s":
                cells.append(timed(p, metric, lambda v, d=digits: "n/a" if math.isnan(v) else f"{v:.{d}g}"))
            elif metric == "params":
                cells.append(fmt(p.value(metric), digits))
            else:
                cells.append(timed(p, metric, lambda v, d=digits: fmt(v, d)))
        rows.append(cells)
    return ["## Optimizer", "", table(["benchmark"] + [c[1] for c in cols], rows), ""] + \
        repetitions_line(picks.values())


def plan_section(results):
    path = os.path.join(results, "plan.json")
    if not os.path.isfile(path):
        return []
    doc = gbjson.load_json(path)
    rows = [r for r in doc.get("rows", []) if isinstance(r, dict)]
    dps = sorted({r.get("dp") for r in rows if isinstance(r.get("dp"), (int, float))})
    model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    context = doc.get("context") if isinstance(doc.get("context"), dict) else {}
    order = stage_table.order(stage_table.parse(path, context), [r.get("stage") for r in rows])
    out = []
    for stage in order:
        mine = {r.get("dp"): r for r in rows if r.get("stage") == stage}
        if mine:
            out.append([stage] + [fmt(mine[d].get("gb_per_gpu", math.nan), 2) if d in mine else ""
                                  for d in dps])
    if not out:
        return []
    params = model.get("params")
    title = f"{count_text(params)} parameters" if isinstance(params, (int, float)) else "the planned model"
    return [f"## Plan: memory per GPU (GB) against N, {title} (zb_plan)", "",
            table(["stage"] + [f"N={d:g}" for d in dps], out), ""]


def pipeline_section(results):
    """Strategy by M: memory and gradient memory (pipeline.json), volume (pipeline_wire.json when
    present), step, exposed and tail communication."""
    timed_picks, wire = load(results, "pipeline.json"), load(results, "pipeline_wire.json")
    if timed_picks is None and wire is None:
        return []

    def keyed(picks):
        return {(p.params.get("stage"), gbjson.number(p.params.get("microbatches"))): p
                for p in (picks or {}).values() if p.family == "pipeline"}

    t, w = keyed(timed_picks), keyed(wire)
    _, order, _ = stage_order(results, ["pipeline.json", "pipeline_wire.json"],
                              list((timed_picks or {}).values()) + list((wire or {}).values()))
    rows = []
    for key in sorted(set(t) | set(w), key=lambda k: (stage_table.position(order, k[0]), k[1] or 0)):
        tp, wp = t.get(key), w.get(key)
        mem = tp if tp is not None else wp
        vol = wp if wp is not None else tp
        rows.append([key[0], fmt(key[1], 0), fmt(value(mem, "bytes_per_param_formula")),
                     fmt(value(mem, "bytes_per_param_measured")),
                     fmt(value(mem, "grad_bytes_per_param_formula")),
                     fmt(value(mem, "grad_bytes_per_param_measured")), fmt(value(vol, "volume_psi_formula"), 4),
                     fmt(value(vol, "volume_psi_measured"), 4), timed(tp, "step_s", ms),
                     timed(tp, "exposed_comm_s", ms), timed(tp, "tail_comm_s", ms),
                     " / ".join(wrong_cell(p) for p in (wp, tp))])
    head = ["stage", "M", "bytes/param formula", "measured", "grad bytes/param formula", "measured",
            "volume formula (Ψ)", "measured (Ψ)", "step (ms)", "exposed comm (ms)", "tail (ms)",
            "wrong (wire / time)"]
    first = next(iter((timed_picks or wire).values()), None)
    out = ["## Pipeline: dp, z1 and pipeline ZeRO-2 against micro-batches (zb_pipeline)", ""]
    if first is not None:
        params = [f"{k}:{first.params[k]}" for k in ("params", "chunks", "pp", "pp_rank", "optimizer", "grad")
                  if k in first.params]
        out += [f"Model {', '.join(params)}; N = {fmt(first.value('ranks'), 0)} ranks; per parameter of the "
                "pipeline stage. Volume ideal: 2, 2 and M + 1.", ""]
    out += [table(head, rows), "",
            "- grad bytes/param: the accumulation buffer (dp, z1) or the own shard and two slots (z2), "
            "measured like the state. Exposed: the time compute waited for communication; tail: the part "
            "after the last backward."]
    out.append("- volume: pipeline_wire.json, measured at the sockets." if wire is not None
               else "- volume: pipeline.json (no socket run).")
    return out + [""] + repetitions_line(t.values())


def main(argv=None):
    p = cli.Parser(description=__doc__.splitlines()[0])
    p.add_argument("results", metavar="RESULTS_DIR")
    p.add_argument("--print", action="store_true", help="also print summary.md")
    p.add_argument("--fit-params", metavar="P", help="say which stages fit a model of P parameters "
                   "(7e9, 7G, 7000000000; K, M, G, T = 1e3 ... 1e12); default: the run's model")
    p.add_argument("--fit-memory", metavar="BYTES", help="memory one rank may hold (80G; K = 1024); "
                   "default: this machine's, from manifest.json")
    args = p.parse_args(argv)
    if not os.path.isdir(args.results):
        print(f"summary: error: {args.results} is not a folder", file=sys.stderr)
        return 2
    fit_params = parse_count(args.fit_params, binary=False) if args.fit_params is not None else None
    fit_memory = parse_count(args.fit_memory, binary=True) if args.fit_memory is not None else None
    for flag, given, parsed in (("--fit-params", args.fit_params, fit_params),
                                ("--fit-memory", args.fit_memory, fit_memory)):
        if given is not None and parsed is None:
            print(f"summary: error: {flag}={given}: expected a positive number such as 7e9 or 80G",
                  file=sys.stderr)
            return 2
    try:
        lines, found, cut = first_screen(args.results, fit_params, fit_memory)
        lines += ["# Details", ""]
        for section in (zero_section, predict_section, quantized_section, collectives_section, sweep_section,
                        optimizer_section, plan_section, pipeline_section, offload_section):
            lines += section(args.results)
        if cut:
            lines += summary_checks.every_check_section(found)
    except gbjson.InputError as e:
        print(f"summary: error: {e}", file=sys.stderr)
        return 2
    text = "\n".join(lines).rstrip() + "\n"
    path = os.path.join(args.results, "summary.md")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    if args.print:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
