#!/usr/bin/env python3
"""The GPU check's figures, read from its results and logs: one short function per GPU path.

usage: tools/gpu_summary.py RESULTS_DIR LOGS_DIR

Prints the lines that tools/gpu_check.sh puts under 'figures' in summary.txt. A path whose
results are missing or unreadable prints one 'n/a' line saying so; the exit code is 0 either
way, because the checks, not the figures, decide PASS or FAIL. A later GPU path adds one
function and one FIGURES entry.
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plots"))
import gbjson  # noqa: E402  (plots/ is not a package; stdlib only, so it runs on the GPU machine)
import stage_table  # noqa: E402

BYTES_256MIB = 256 << 20
PARAMS_256M = 256 << 20


def runs_of(results, name):
    """The measured rows of results/NAME in its stage table's order (the file's own without
    one), or raises gbjson.InputError."""
    path = os.path.join(results, name)
    if not os.path.exists(path):
        raise gbjson.InputError(f"no {name}: its check failed or did not run")
    context, runs = gbjson.load_gb(path)
    runs = stage_table.sorted_by_table(stage_table.parse(path, context), runs,
                                       lambda r: r.params.get("stage"))
    return [r for r in runs if r.run_type == "iteration"]


def num(value, fmt=".3g"):
    return "n/a" if value is None or math.isnan(value) else format(value, fmt)


def collectives(results, logs):
    out = []
    rows = runs_of(results, "collectives.json")
    for r in rows:
        if gbjson.number(r.params.get("bytes")) != BYTES_256MIB:
            continue
        c = r.counters
        place = " in place" if r.params.get("placement") == "in" else ""
        out.append(f"nccl {r.family:<14} 256 MiB {r.params.get('dtype', '?')}{place}: "
                   f"algbw {num(c.get('algbw_GBps'))} GB/s, busbw {num(c.get('busbw_GBps'))} GB/s, "
                   f"wrong {num(c.get('wrong'), 'g')}")
    if not out:
        return ["nccl collectives: n/a (no 256 MiB rows in collectives.json)"]
    # The harness's own cost: each size timed through zerobench against the bare NCCL call.
    timed = sorted((r for r in rows if math.isfinite(r.counters.get("overhead_ratio", math.nan))),
                   key=lambda r: r.counters["overhead_ratio"])
    if timed:
        worst = timed[-1]
        # Each call against itself beside the worst: how far this machine moved two runs of one call.
        selves = [f"{who} {num(worst.counters[key])}" for who, key in
                  (("bare", "bare_repeat_ratio"), ("ours", "ours_repeat_ratio"))
                  if math.isfinite(worst.counters.get(key, math.nan))]
        against = f"; against itself: {', '.join(selves)}" if selves else ""
        out.append(f"overhead (time through zerobench / bare NCCL call): median "
                   f"{num(timed[len(timed) // 2].counters['overhead_ratio'])}, highest "
                   f"{num(worst.counters['overhead_ratio'])} ({worst.family}, "
                   f"{gbjson.number(worst.params.get('bytes')):.0f} B{against}), over {len(timed)} sizes")
    if rows[0].counters.get("ranks", math.nan) == 1:
        out.append("  (one rank: busbw is 0 by its definition, 2(N-1)/N or (N-1)/N of algbw; "
                   "algbw is the local copy rate, and an in-place call copies nothing)")
    return out


def hier(results, logs):
    rows = runs_of(results, "hier.json")
    worst = max((r.counters.get("wrong", math.nan) for r in rows), default=math.nan)
    big = [r for r in rows if gbjson.number(r.params.get("bytes")) == BYTES_256MIB]
    out = [f"hier_all_reduce: {len(rows)} sizes, wrong at most {num(worst, 'g')}"]
    for r in big:
        out.append(f"hier_all_reduce 256 MiB: algbw {num(r.counters.get('algbw_GBps'))} GB/s over "
                   f"{num(r.counters.get('nodes'), 'g')} node(s) of "
                   f"{num(r.counters.get('ranks_per_node'), 'g')}")
    return out


def torch_ratio(logs, grad):
    """ours/torch at 256M from tools/torch_adam.py's table in logs/torch_adam_GRAD.log."""
    path = os.path.join(logs, f"torch_adam_{grad}.log")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                cols = line.split()
                if cols and cols[0] == str(PARAMS_256M):
                    return f"torch {cols[2]} GB/s, ours/torch {cols[-1]}"
                if "skipped" in line:
                    return line.strip()
    except OSError:
        return "torch n/a (no log)"
    return "torch n/a (no 256M row)"


def optimizer(results, logs):
    out = []
    for r in runs_of(results, "optimizer.json"):
        p = r.params
        if (r.family == "adam" and p.get("impl") == "cuda"
                and gbjson.number(p.get("params")) == PARAMS_256M):
            c = r.counters
            out.append(f"adam 256M {p.get('grad')} grads: {num(c.get('GBps'))} GB/s, "
                       f"frac_of_limit {num(c.get('frac_of_limit'))} of {num(c.get('limit_GBps'))} "
                       f"GB/s; {torch_ratio(logs, p.get('grad'))}")
    return out or ["adam 256M: n/a (no adam/params:268435456/.../impl:cuda rows)"]


def per_stage(results, name):
    by_stage = {r.params.get("stage"): r.counters for r in runs_of(results, name)}
    return [(s, c) for s, c in by_stage.items() if s is not None]


def zero(results, logs):
    out = []
    for stage, c in per_stage(results, "zero.json"):
        measured = c.get("bytes_per_param_measured", math.nan)
        formula = c.get("bytes_per_param_formula", math.nan)
        out.append(f"zero {stage}: bytes/param measured {num(measured, '.3f')} formula "
                   f"{num(formula, '.3f')} (x{num(measured / formula, '.4f')}), accounted "
                   f"{num(c.get('bytes_per_param_accounted'), '.3f')}, wrong {num(c.get('wrong'), 'g')}")
    return out or ["zero: n/a (no stages in zero.json)"]


# zb_predict --explain's parts of the difference (measured minus predicted), as the check names them.
EXPLAINED = (("explain_collective_s", "collectives"), ("explain_late_start_s", "late starts"),
             ("explain_handoff_s", "hand-offs"))


def predicted(results, name, what):
    out = []
    for stage, c in per_stage(results, name):
        line = (f"{what} {stage}: comm {num(c.get('comm_s_predicted', math.nan) * 1e3, '.3f')} ms predicted, "
                f"{num(c.get('comm_s_measured', math.nan) * 1e3, '.3f')} measured "
                f"(comm_error {num(c.get('comm_error', math.nan), '+.3f')})")
        parts = [(label, c[key]) for key, label in EXPLAINED if isinstance(c.get(key), (int, float))]
        if parts:
            line += "; explained: " + ", ".join(f"{label} {num(v * 1e3, '+.3f')} ms" for label, v in parts)
        out.append(line)
    return out or [f"{what}: n/a (no stages in {name})"]


def predict(results, logs):
    return predicted(results, "predict.json", "predict from zb_collectives")


def predict_nccl_tests(results, logs):
    if not os.path.exists(os.path.join(results, "predict_nccl_tests.json")):
        return ["predict from nccl-tests: n/a (nccl-tests not given: see the nccl_tests line above)"]
    return predicted(results, "predict_nccl_tests.json", "predict from nccl-tests")


def overlap(results, logs):
    out = []
    for stage, c in per_stage(results, "overlap.json"):
        ms = {k: c.get(k, math.nan) * 1e3 for k in ("step_s", "compute_s", "comm_s", "exposed_comm_s")}
        out.append(f"overlap {stage}: overlap_eff {num(c.get('overlap_eff'), '.3f')}; step "
                   f"{num(ms['step_s'], '.2f')} ms, compute {num(ms['compute_s'], '.2f')} ms, comm "
                   f"{num(ms['comm_s'], '.2f')} ms, exposed comm {num(ms['exposed_comm_s'], '.2f')} ms; "
                   f"wrong {num(c.get('wrong'), 'g')}")
    traces = []
    for stage, _ in per_stage(results, "overlap.json"):
        try:
            doc = gbjson.load_json(os.path.join(results, f"trace_{stage}.json"))
            traces.append(f"{stage} {len(doc.get('traceEvents', []))}")
        except gbjson.InputError:
            traces.append(f"{stage} n/a")
    out.append("overlap traces (events): " + ", ".join(traces))
    return out if len(out) > 1 else ["overlap: n/a (no stages in overlap.json)"]


def pipeline(results, logs):
    out = []
    for r in runs_of(results, "pipeline.json"):
        c, p = r.counters, r.params
        ms = {k: c.get(k, math.nan) * 1e3 for k in ("step_s", "exposed_comm_s", "tail_comm_s")}
        out.append(f"pipeline {p.get('stage', '?')} M={p.get('microbatches', '?')}: bytes/param measured "
                   f"{num(c.get('bytes_per_param_measured', math.nan), '.3f')} formula "
                   f"{num(c.get('bytes_per_param_formula', math.nan), '.3f')}, grad bytes/param measured "
                   f"{num(c.get('grad_bytes_per_param_measured', math.nan), '.3f')} formula "
                   f"{num(c.get('grad_bytes_per_param_formula', math.nan), '.3f')}; step "
                   f"{num(ms['step_s'], '.2f')} ms, exposed {num(ms['exposed_comm_s'], '.2f')} ms, tail "
                   f"{num(ms['tail_comm_s'], '.2f')} ms; wrong {num(c.get('wrong'), 'g')}")
    return out or ["pipeline: n/a (no rows in pipeline.json)"]


def offload(results, logs):
    out = []
    for name in ("offload.json", "offload_device.json"):
        if not os.path.exists(os.path.join(results, name)):
            continue
        for r in runs_of(results, name):
            c, p = r.counters, r.params
            gbps = "d2h_GBps" if r.family == "offload_grads" else "h2d_GBps"
            out.append(f"{r.family} slots={p.get('slots', '?')} optimizer on {p.get('optimizer_on', '-')}: device "
                       f"bytes/param measured {num(c.get('device_bytes_per_param_measured', math.nan), '.4f')} "
                       f"formula "
                       f"{num(c.get('device_bytes_per_param_formula', math.nan), '.4f')}; "
                       f"{gbps.split('_')[0]} {num(c.get(gbps, math.nan), '.1f')} GB/s, alone "
                       f"{num(c.get('copy_limit_GBps', math.nan), '.1f')} GB/s; hidden "
                       f"{num(c.get('hidden_frac', math.nan), '.2f')}; wrong {num(c.get('wrong', math.nan), 'g')}")
    if not out:
        raise gbjson.InputError("no offload.json: its check failed or did not run")
    return out


# (what, function): one entry per GPU path, in the order the check runs them.
FIGURES = [
    ("NCCL collectives", collectives),
    ("hierarchical all-reduce", hier),
    ("ZeRO stages", zero),
    ("prediction from the collective sweep", predict),
    ("prediction from nccl-tests", predict_nccl_tests),
    ("overlap with gemm compute", overlap),
    ("Adam on the GPU", optimizer),
    ("pipeline ZeRO-2", pipeline),
    ("offload through slots", offload),
]


def main(argv):
    if len(argv) != 3:
        print("usage: tools/gpu_summary.py RESULTS_DIR LOGS_DIR", file=sys.stderr)
        return 2
    results, logs = argv[1], argv[2]
    for what, figure in FIGURES:
        try:
            lines = figure(results, logs)
        except (gbjson.InputError, KeyError, TypeError, ValueError) as e:
            lines = [f"{what}: n/a ({e})"]
        for line in lines:
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
