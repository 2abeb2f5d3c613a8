"""Builds small Google Benchmark, zb_plan, trace and manifest documents for the plots tests,
with the counter names and the stage table in the context that the C++ writes."""

import contextlib
import importlib
import io
import json
import math
import os
import subprocess
import sys

ROOT = os.environ.get("ZB_ROOT") or os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))
PLOTS = os.path.join(ROOT, "plots")
# The A/B gate's modules (plots/ab/) import as plots/'s own do.
sys.path[:0] = [p for p in (PLOTS, os.path.join(PLOTS, "ab")) if p not in sys.path]
NAN = math.nan


def run_script(script, *args):
    """Runs plots/<script> as the user would, in a new interpreter; returns the CompletedProcess."""
    return subprocess.run([sys.executable, os.path.join(PLOTS, script), *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def run_tool(script, *args):
    """Runs plots/<script>'s main() with these arguments in this process, its output captured,
    and returns a CompletedProcess as run_script would: the exit code (argparse's SystemExit
    included), stdout and stderr. In process, since a new interpreter imports matplotlib and
    scipy again, a second or two per call; run_script keeps the command line itself tested."""
    if PLOTS not in sys.path:
        sys.path.insert(0, PLOTS)
    module = importlib.import_module(script.removesuffix(".py"))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = module.main([str(a) for a in args])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return subprocess.CompletedProcess([script, *map(str, args)], code or 0, out.getvalue(), err.getvalue())


def row(name, real_time=1000.0, time_unit="ns", rep=0, reps=1, **counters):
    """One iteration row, the way Google Benchmark's JSON reporter writes it."""
    r = {"name": name, "family_index": 0, "per_family_instance_index": 0,
         "run_name": name, "run_type": "iteration", "repetitions": reps,
         "repetition_index": rep, "threads": 1, "iterations": 10,
         "real_time": real_time, "cpu_time": real_time, "time_unit": time_unit}
    r.update(counters)
    return r


def aggregate(name, agg, real_time, time_unit="ns", reps=3, **counters):
    r = row(name, real_time, time_unit, reps=reps, **counters)
    r.update({"name": f"{name}_{agg}", "run_type": "aggregate", "aggregate_name": agg,
              "aggregate_unit": "time"})
    return r


def stage(name, article, weights, grads, optimizer, units, passes):
    """One row of a stage table as the C++ writes it; passes: (op, group, psi)."""
    passes = [{"op": op, "group": group, "psi": psi} for op, group, psi in passes]
    return {"name": name, "article": article, "weights": weights, "grads": grads,
            "optimizer": optimizer, "units": units, "node_weight_copy": False, "passes": passes,
            "volume_psi": sum((2.0 if p["op"] == "all_reduce" else 1.0) * p["psi"] for p in passes)}


RS, AG, AR = ("reduce_scatter", "world", 1.0), ("all_gather", "world", 1.0), ("all_reduce", "world", 1.0)
# A stage table shaped like the C++ one. Crafted: the tests read it, they do not check it.
STAGE_TABLE = [stage("dp", "w+g+o", "replicated", "replicated", "replicated", "buckets", [AR]),
               stage("z1", "w+g+o/N", "replicated", "replicated", "dp_group", "buckets", [RS, AG]),
               stage("z2", "w+(g+o)/N", "replicated", "dp_group", "dp_group", "buckets", [RS, AG]),
               stage("z3", "(w+g+o)/N", "dp_group", "dp_group", "dp_group", "layers", [RS, AG, AG])]


def doc(rows, table=None, **context):
    """A Google Benchmark document; its context carries `table` (default STAGE_TABLE) as the C++
    writes it, a JSON text, or none when table is False; **context adds keys."""
    ctx = {"date": "2025-01-01T00:00:00", "host_name": "testhost", "executable": "zb_test",
           "num_cpus": 4, "collective_algorithms": "library defaults"}
    if table is not False:
        ctx["stage_table"] = json.dumps(STAGE_TABLE if table is None else table)
    ctx.update(context)
    return {"context": ctx, "benchmarks": rows}


def write(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f)  # NaN is written as NaN, as the C++ driver does


def collectives():
    rows = []
    for op, factor in (("all_reduce", 1.5), ("reduce_scatter", 0.75), ("all_gather", 0.75)):
        for k, size in enumerate((4096, 1 << 20, 1 << 24)):
            algbw = 1.0 + k + factor
            rows.append(row(f"{op}/bytes:{size}/dtype:bf16", real_time=10.0 + k, time_unit="us",
                            ranks=4, bytes=size, algbw_GBps=algbw, busbw_GBps=algbw * factor,
                            wrong=0, wire_bytes_formula=size * factor,
                            wire_bytes_measured=NAN if op == "all_gather" else size * factor))
    return doc(rows)


ZERO_STAGES = {"dp": (16.0, 2.0), "z1": (7.0, 2.0), "z2": (5.5, 2.0), "z3": (4.0, 3.0)}


def zero(**planted):
    """zb_zero on one node of 4 ranks, every value within its tolerance; **planted:
    {stage: {counter: value}} over it."""
    rows = []
    for i, (stage, (bpp, vol)) in enumerate(ZERO_STAGES.items()):
        name = f"zero/stage:{stage}/params:1048576/compute:spin:200"
        common = dict(ranks=4, params=1048576, nodes=1, ranks_per_node=4, volume_psi_accounted=vol,
                      volume_psi_measured=NAN if stage == "z3" else vol * 1.001,
                      bytes_per_param_measured=bpp + 0.004, bytes_per_param_formula=bpp,
                      bytes_per_param_accounted=bpp, inter_node_bytes_accounted=0.0,
                      inter_node_bytes_measured=NAN, wrong=0,
                      step_s=0.012 + i * 0.001, comm_s=0.004, compute_s=0.01,
                      exposed_comm_s=0.002 + i * 0.001, overlap_eff=0.5, extra_field=7)
        common.update(planted.get(stage, {}))
        if stage == "z2":
            # Three repetitions plus aggregates: the figure must take GB's median row.
            for rep, t in enumerate((11.0, 13.0, 12.0)):
                rows.append(row(name, t, "ms", rep=rep, reps=3, **dict(common, step_s=t / 1e3)))
            rows.append(aggregate(name, "mean", 12.0, "ms", **dict(common, step_s=0.012)))
            rows.append(aggregate(name, "median", 12.0, "ms",
                                  **dict(common, step_s=0.0125, compute_s=0.0105)))
        else:
            rows.append(row(name, (0.012 + i * 0.001) * 1e3, "ms", **common))
    return doc(rows)


def predict(**planted):
    """zb_predict against zero(): every prediction within 10%; **planted as in zero()."""
    rows = []
    for i, stage in enumerate(ZERO_STAGES):
        measured, exposed = 0.004, 0.002 + i * 0.001
        c = dict(ranks=4, params=1048576, collectives=3 + i, volume_psi_accounted=ZERO_STAGES[stage][1],
                 comm_s_predicted=measured * 1.05, comm_s_measured=measured, comm_error=0.05,
                 exposed_comm_s_predicted=exposed * 0.95, exposed_comm_s_measured=exposed,
                 exposed_error=-0.05, exposed_error_s=-0.05 * exposed, extrapolated=0,
                 step_s_predicted=0.012, compute_s_predicted=0.01)
        c.update(planted.get(stage, {}))
        rows.append(row(f"predict/stage:{stage}/params:1048576", 1.0, "ms", **c))
    return doc(rows)


GIB = 1 << 30


def manifest(backend="mpi", host_memory=32 * GIB, gpu_memory=(), runs=("zero", "zero_sweep")):
    """What run_all.sh's manifest.py writes, in the parts summary.py reads."""
    gpus = [{"index": i, "name": "Test GPU", "memory_total_bytes": m} for i, m in enumerate(gpu_memory)]
    hardware = {"cpu_model": "Test CPU", "cores": 4, "gpus": gpus}
    if host_memory is not None:
        hardware["host_memory_bytes"] = host_memory
    return {"revision": "0123456789abcdef", "dirty": False, "host": "testhost",
            "run_all": "./run_all.sh --quick", "backend": backend, "ranks": 4,
            "runs": [{"name": r, "json": f"{r}.json", "status": "ok"} for r in runs],
            "hardware": hardware}


def spread_z2(doc_, metric, values):
    """zero()'s z2 (three repetitions) with `metric` at `values`, one a repetition."""
    for r in doc_["benchmarks"]:
        if "stage:z2" in r["name"] and r["run_type"] == "iteration":
            r[metric] = values[r["repetition_index"]]
    return doc_


def zero_sweep():
    rows = []
    for stage, comm in (("z1", 4e-4), ("z3", 6e-4)):
        for us in (100, 400, 1600):
            compute = us * 1e-6
            rows.append(row(f"zero_sweep/stage:{stage}/compute_us:{us}", compute * 2e6, "us",
                            ranks=4, compute_s=compute, comm_s=comm,
                            exposed_comm_s=max(comm - compute, 0.0) + 1e-5,
                            step_s=compute + comm))
    return doc(rows)


def optimizer():
    rows = []
    for impl in ("cpu",):
        for fam in ("adam", "momentum"):
            for n in (1 << 20, 1 << 24, 1 << 26):
                rows.append(row(f"{fam}/params:{n}/grad:bf16/impl:{impl}", n / 1e3, "us",
                                params_per_s=n * 1e3, GBps=10.0 + n / (1 << 26),
                                limit_GBps=20.0, frac_of_limit=0.5))
    rows.append(row("opt_step/stage:z1/params:1048576", 5.0, "ms", reduce_s=0.002,
                    update_s=0.001, gather_s=0.002, step_s=0.005))
    return doc(rows)


def plan():
    rows = []
    for stage, (fixed, sharded) in {"dp": (16, 0), "z1": (4, 12), "z2": (2, 14),
                                    "z3": (0, 16)}.items():
        for dp in (1, 8, 64, 512):
            bpp = fixed + sharded / dp
            rows.append({"stage": stage, "dp": dp, "tp": 1, "pp": 1, "ep": 1,
                         "bytes_per_param": bpp, "gb_per_gpu": bpp * 7.0,
                         "elements_per_step": 7e9, "bytes_per_step": 1.4e10})
    return {"model": {"params": 7e9, "layers": 32}, "rows": rows}


THREADS = ["compute", "comm", "compute waits for communication"]


def trace(waits=False):
    """Two ranks' compute and communication; with waits, the track of the time compute waited,
    as the C++ trace has it."""
    tracks = THREADS if waits else THREADS[:2]
    events = [{"name": "thread_name", "ph": "M", "pid": r, "tid": t, "args": {"name": name}}
              for r in range(2) for t, name in enumerate(tracks)]
    for r in range(2):
        for k in range(3):
            events.append({"name": f"layer {k} forward", "ph": "X", "ts": 1000.0 + 300 * k,
                           "dur": 250.0, "pid": r, "tid": 0, "args": {}})
            events.append({"name": "all_gather 4.0 MiB", "ph": "X", "ts": 1100.0 + 300 * k,
                           "dur": 180.0 + r, "pid": r, "tid": 1, "args": {"bytes": 4194304}})
        if waits:
            events.append({"name": "wait all_gather", "ph": "X", "ts": 1950.0, "dur": 40.0 + r,
                           "pid": r, "tid": 2, "args": {}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def results_folder(path):
    """Writes every input zbplot knows; returns {file name: document}."""
    docs = {"collectives.json": collectives(), "zero.json": zero(),
            "zero_sweep.json": zero_sweep(), "optimizer.json": optimizer(),
            "plan.json": plan(), "trace.json": trace(), "predict.json": predict(),
            "manifest.json": manifest()}
    os.makedirs(path, exist_ok=True)
    for name, d in docs.items():
        write(os.path.join(path, name), d)
    return docs
