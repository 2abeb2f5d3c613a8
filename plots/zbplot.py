#!/usr/bin/env python3
"""Draws every figure a results folder has data for into RESULTS_DIR/figures (PNG, PDF, CSV)."""

import argparse
import concurrent.futures
import glob
import multiprocessing
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli  # noqa: E402
import gbjson  # noqa: E402
import stage_table  # noqa: E402
import figstyle  # noqa: E402  (selects the Agg backend before any figure module)
import fig_collectives  # noqa: E402
import fig_offload  # noqa: E402
import fig_optimizer  # noqa: E402
import fig_pipeline  # noqa: E402
import fig_plan  # noqa: E402
import fig_predict  # noqa: E402
import fig_quantized  # noqa: E402
import fig_sweep  # noqa: E402
import fig_trace  # noqa: E402
import fig_zero  # noqa: E402


def _gb(path, doc):
    """The file's runs, in its stage table's order when it carries one; figures draw stages in
    the order their runs come."""
    context, runs = gbjson.parse_gb(path, doc)
    return stage_table.sorted_by_table(stage_table.parse(path, context), runs,
                                       lambda r: r.params.get("stage"))


def _plan(path, doc):
    """zb_plan's document, its rows in its stage table's order when it carries one."""
    fig_plan.check(path, doc)
    context = doc.get("context") if isinstance(doc.get("context"), dict) else {}
    table = stage_table.parse(path, context)
    return dict(doc, rows=stage_table.sorted_by_table(table, doc["rows"], lambda r: r.get("stage")))


# (input file, how to turn its JSON into what the figure takes, figure). A tuple of files:
# the first one present; volumes come from run_all.sh's socket run when there is one,
# because only a socket transport lets volume_psi_measured be measured.
FIGURES = [
    ("collectives.json", _gb, fig_collectives.busbw),
    ("zero.json", _gb, fig_zero.bytes_per_param),
    (("zero_wire.json", "zero.json"), _gb, fig_zero.volume),
    (("zero_wire.json", "zero.json"), _gb, fig_zero.inter_node_bytes),
    ("zero.json", _gb, fig_zero.step_time),
    ("zero_sweep.json", _gb, fig_sweep.exposed_vs_ratio),
    ("predict.json", _gb, fig_predict.predicted_vs_measured),
    ("predict_quantized.json", _gb, fig_quantized.crossing),
    ("optimizer.json", _gb, fig_optimizer.bandwidth),
    ("plan.json", _plan, fig_plan.memory),
    (("pipeline_wire.json", "pipeline.json"), _gb, fig_pipeline.microbatches),
    ("offload_sweep.json", _gb, fig_offload.exposed),
    ("offload.json", _gb, fig_offload.memory),
]


def _timed_exposed(results, doc):
    """(median, lowest, highest) of exposed_comm_s over the repetitions of the zero.json
    benchmark whose step a zb_zero trace drew (its stage and quantization, as the trace names
    them; the full step's round only), else None."""
    meta = doc.get("zerobench") if isinstance(doc, dict) else None
    path = os.path.join(results, "zero.json")
    if not isinstance(meta, dict) or meta.get("round") != "step" or not os.path.isfile(path):
        return None
    try:
        _, runs = gbjson.load_gb(path)
    except gbjson.InputError:
        return None
    picks = [p for p in gbjson.representative(runs).values()
             if "stage" in p.params and stage_table.config_label(p.params) == meta.get("stage")]
    if len(picks) != 1:  # none, or several runs of one configuration: none to name
        return None
    return (picks[0].value("exposed_comm_s"), *picks[0].spread("exposed_comm_s"))


def _jobs(results):
    """([(input name, figure name, draw(outdir))], notes) for figures whose input exists."""
    jobs, loaded, notes = [], {}, []
    for names, convert, draw in FIGURES:
        names = (names,) if isinstance(names, str) else names
        fname = next((n for n in names if os.path.isfile(os.path.join(results, n))), None)
        what = f"{draw.__module__}.{draw.__name__}"
        if fname is None:
            notes.append(f"skipping {what}: no {' or '.join(names)}")
            continue
        path = os.path.join(results, fname)
        if fname not in loaded:
            loaded[fname] = gbjson.load_json(path)
        data = convert(path, loaded[fname])
        jobs.append((fname, what, lambda out, d=data, f=draw: f(d, out)))
    traces = sorted(glob.glob(os.path.join(glob.escape(results), "trace*.json")))
    if not traces:
        notes.append("skipping fig_trace.timeline: no trace*.json")
    for path in traces:
        fname = os.path.basename(path)
        doc = gbjson.load_json(path)
        fig_trace.check(path, doc)
        # trace.json -> timeline, trace_z3.json -> timeline_z3
        stem = "timeline" + fname[len("trace"):-len(".json")]
        timed = _timed_exposed(results, doc)
        jobs.append((fname, f"fig_trace.timeline ({fname})",
                     lambda out, d=doc, s=stem, t=timed: fig_trace.timeline(d, out, s, t)))
    return jobs, notes


# The figures to draw, where the processes forked to draw them find them (a closure does not
# pickle; a forked process has the parent's memory).
_JOBS = []


def _draw(i, outdir):
    """Draws figure i of _JOBS: (its paths, None, its notes), or (None, why there was nothing to
    draw, its notes): the notes travel back with it from a drawing process."""
    del figstyle.NOTES[:]
    try:
        return _JOBS[i][2](outdir), None, list(figstyle.NOTES)
    except figstyle.NoData as e:
        return None, str(e), list(figstyle.NOTES)


def _positive(text):
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1 is needed, not {text!r}")
    return n


def main(argv=None):
    p = cli.Parser(description=__doc__)
    p.add_argument("results", metavar="RESULTS_DIR", help="folder written by run_all.sh")
    p.add_argument("--jobs", type=_positive, default=None,
                   help="figures drawn at once, each in a process of its own (default: the cores "
                        "this process may run on)")
    args = p.parse_args(argv)
    if not os.path.isdir(args.results):
        print(f"zbplot: error: {args.results} is not a folder", file=sys.stderr)
        return 2
    try:
        # Every input is read and checked before anything is drawn, so a bad
        # file leaves no half-finished figures folder behind.
        jobs, notes = _jobs(args.results)
    except gbjson.InputError as e:
        print(f"zbplot: error: {e}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"zbplot: note: {note}", file=sys.stderr)
    outdir = os.path.join(args.results, "figures")
    _JOBS[:] = jobs
    # Each figure is drawn alone, so they are drawn side by side where there are cores (a
    # run's nineteen took 16 s on one core). The lines below come in the figures' own order.
    workers = min(len(jobs), args.jobs or len(os.sched_getaffinity(0)))
    if workers > 1:
        # An executor, not a Pool: a drawing process that dies (killed, out of memory) ends the
        # run with an error here, where a Pool would wait for its figure forever.
        try:
            fork = multiprocessing.get_context("fork")
            with concurrent.futures.ProcessPoolExecutor(workers, mp_context=fork) as ex:
                results = list(ex.map(_draw, range(len(jobs)), [outdir] * len(jobs)))
        except concurrent.futures.process.BrokenProcessPool:
            print("zbplot: error: a process drawing figures died (killed, or out of memory); "
                  "--jobs=1 draws them one at a time", file=sys.stderr)
            return 1
    else:
        results = [_draw(i, outdir) for i in range(len(jobs))]
    drawn = 0
    for (fname, what, _), (paths, nothing, said) in zip(jobs, results):
        for line in said:
            print(f"zbplot: {line}", file=sys.stderr)
        if nothing is not None:
            print(f"zbplot: note: skipping {what}: {fname}: {nothing}", file=sys.stderr)
            continue
        drawn += 1
        stem = os.path.splitext(os.path.relpath(paths[0], args.results))[0]
        print(f"zbplot: wrote {stem}.{{png,pdf,csv}}")
    if not drawn:
        print("zbplot: note: no figures drawn", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
