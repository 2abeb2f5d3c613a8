"""summary.md's "check these" list: every value of every results file that lies outside its
tolerance (plots/tolerances.py), with the reason the tool knows from the files themselves.

Reads what the C++ wrote and compares; it measures nothing.
"""

import glob
import math
import os
import re
from dataclasses import dataclass

import gbjson
import tolerances as tol
from stage_table import by_name, parse
from summary_format import size_text

ITEMS_PER_LINE = 6  # items named on a first-screen line; the rest go to "Every check" below
NO_CAUSE = "no cause known to the tool"
# Name segments that say how Google Benchmark timed a run, not what ran.
NOT_LABELS = {"iterations", "manual_time", "real_time", "process_time", "repeats"}


@dataclass
class Finding:
    check: str  # what was held against what, and how far it may be off
    file: str
    item: str  # which benchmark, in the file's own words ("z2", "all_reduce 64 KiB")
    value: str  # how far off ("+22.0%", "wrong = 3")
    reason: str
    order: int  # the check's place in the list: bugs first


def _finite(*vs):
    return all(isinstance(v, float) and math.isfinite(v) for v in vs)


def _pct(v):
    return f"{v * 100:+.1f}%"


def _bound(v):
    return "0%" if v == 0 else f"{v:+.0%}"


def _rel(measured, reference):
    if reference == 0:
        return 0.0 if measured == 0 else math.copysign(math.inf, measured)
    return measured / reference - 1


def _algorithms(context):
    """Why rings' books and a measurement may part: the library chose its own algorithms."""
    algos = (context or {}).get("collective_algorithms", "")
    if algos == "library defaults":
        return ("the library's default algorithms ran (`collective_algorithms`: library defaults), "
                "and they need not be rings; the books count rings")
    if algos:
        return f"ring algorithms were set ({algos}); {NO_CAUSE}"
    return f"the file does not say which algorithms ran; {NO_CAUSE}"


def check_wrong(ctx, p):
    worst = p.spread("wrong")[1]
    if _finite(worst) and worst > tol.WRONG_MAX:
        yield (0, f"`wrong` above {tol.WRONG_MAX}", f"wrong = {worst:g}",
               "elements differ from the reference result: a bug, never noise")


# (measured, what it is held against, the tracker's books where that is a formula, what)
MEMORY = [("bytes_per_param_measured", "bytes_per_param_formula", "bytes_per_param_accounted",
           "bytes per parameter"),
          ("grad_bytes_per_param_measured", "grad_bytes_per_param_formula", None,
           "gradient bytes per parameter"),
          ("device_bytes_per_param_measured", "device_bytes_per_param_formula", None,
           "device bytes per parameter"),
          ("host_bytes_per_param_measured", "host_bytes_per_param_accounted", None,
           "host bytes per parameter")]


def _memory_why(reference, f, b):
    if reference.endswith("_accounted"):
        return "the tracker's books are what it is held against: the difference was allocated beside them"
    if not _finite(b):
        return "no books beside it to tell whether the harness or something else allocated the difference"
    if math.isclose(b, f, rel_tol=tol.BOOKS_REL):
        return ("the tracker's books equal the formula, so the difference was allocated beside the "
                "state (the allocator, a library's buffers)")
    return f"the tracker's books say {b:.3f}: the harness allocates other than the formula"


def check_memory(ctx, p):
    params = p.value("params")
    for measured, reference, books, what in MEMORY:
        m, f = p.value(measured), p.value(reference)
        if not _finite(m, f):
            continue
        allowed = tol.MEMORY_REL * abs(f)
        if _finite(params) and params > 0:
            allowed = max(allowed, tol.MEMORY_SLACK_BYTES / params)
        if abs(m - f) <= allowed:
            continue
        side = "the books" if reference.endswith("_accounted") else "the formula"
        yield (2, f"measured {what} off {side} (`{measured}` against `{reference}`, allowed "
               f"{tol.MEMORY_REL:.0%} or {tol.MEMORY_SLACK_BYTES // 1024} KiB per rank)",
               f"{m:.3f} against {f:.3f}", _memory_why(reference, f, p.value(books) if books else math.nan))


def _padding(p):
    pad = p.value("padding")
    if _finite(pad) and pad > 0:
        return (f"the run padded the shards by {pad:g} elements so that the ranks divide them: the "
                "books may count padding that the formula leaves out")
    return NO_CAUSE


def check_books(ctx, p, table):
    """The harness's own books against the formula: memory tracker and traffic log."""
    pairs = [("bytes_per_param_accounted", p.value("bytes_per_param_formula"),
              "`bytes_per_param_formula`", "memory books")]
    formula = p.value("volume_psi_formula")
    source = "`volume_psi_formula`"
    row = table.get(p.params.get("stage"))
    one_node = p.value("nodes") == 1
    # A quantized configuration's volume depends on the pieces' padding to whole blocks, which
    # only the books know: the table's one-node volume is checked on unquantized stages alone.
    asked = any(k in p.params for k in ("quantize_weights", "quantize_grads")) or \
        any(v != "none" for v in ((row or {}).get("quantization") or {}).values())
    if not _finite(formula) and row and one_node and not asked and isinstance(row.get("volume_psi"), (int, float)):
        # The table's volume is one node's: across nodes the node-aware stages add a pass.
        formula, source = float(row["volume_psi"]), "the stage table's volume_psi (one node)"
    pairs.append(("volume_psi_accounted", formula, source, "volume books"))
    for books, f, source, what in pairs:
        b = p.value(books)
        if _finite(b, f) and not math.isclose(b, f, rel_tol=tol.BOOKS_REL, abs_tol=1e-12):
            yield (1, f"{what} off the formula (`{books}` against {source})", f"{b:.4f} against {f:.4f}",
                   _padding(p))


def check_sockets(ctx, p):
    for measured, books in (("volume_psi_measured", "volume_psi_accounted"),
                            ("wire_bytes_measured", "wire_bytes_accounted"),
                            ("wire_bytes_measured", "wire_bytes_formula")):
        m, b = p.value(measured), p.value(books)
        if _finite(m, b) and abs(_rel(m, b)) > tol.SOCKET_REL:
            side = "the ring formula" if books.endswith("_formula") else "the books"
            yield (3, f"bytes at the sockets off {side} (`{measured}` against `{books}`, allowed "
                   f"±{tol.SOCKET_REL:.0%})", _pct(_rel(m, b)), _algorithms(ctx))


def check_links(ctx, p):
    for measured, books, what in (("inter_node_bytes_measured", "inter_node_bytes_accounted", "inter-node"),
                                  ("intra_node_bytes_measured", "intra_node_bytes_accounted", "intra-node")):
        m, b = p.value(measured), p.value(books)
        if not _finite(m, b):
            continue
        r = _rel(m, b)
        if -tol.LINK_BELOW <= r <= tol.LINK_ABOVE:
            continue
        why = _algorithms(ctx) if r > 0 else \
            "below the payload: the counter missed traffic, or the traffic took another path"
        yield (3, f"{what} bytes off the rings' books (`{measured}` against `{books}`, allowed "
               f"{_bound(-tol.LINK_BELOW)} to {_bound(tol.LINK_ABOVE)})", _pct(r), why)


def _sweep(results, ctx):
    """The sweep zb_predict read, as its command line names it (else predict_sweep.json): the
    file's name, context and runs; "", {} and [] without one."""
    m = re.search(r"--sweep=(\S+)", (ctx or {}).get("command_line", ""))
    names = [os.path.basename(m.group(1))] if m else []
    for name in names + ["predict_sweep.json"]:
        path = os.path.join(results, name)
        if os.path.isfile(path):
            return (name, *gbjson.load_gb(path))
    return "", {}, []


def _sweep_noise(runs):
    """The largest |bare_repeat_ratio - 1| over a sweep's sizes (each size's median); NaN
    without one."""
    ratios = [abs(p.value("bare_repeat_ratio") - 1) for p in gbjson.representative(runs).values()
              if _finite(p.value("bare_repeat_ratio"))]
    return max(ratios, default=math.nan)


def _warm_gathers(ctx, p, table, sweep_ctx, off_s):
    """Whether a stage that all-gathers was priced short on CPU ranks of one node from a sweep
    that ran each size's calls on the same buffers: the bias measured there (docs/predict.md),
    since the step's gathers each read their own layer's data, no longer in the caches."""
    ctx = ctx or {}
    row = table.get(p.params.get("stage")) if table else None
    cpu_ranks = ctx.get("backend") in ("mpi", "gloo")  # nccl is the GPUs'
    return (cpu_ranks and str(ctx.get("nodes")) == "1"
            and _finite(off_s) and off_s < 0 and row is not None
            and any(x.get("op") == "all_gather" for x in row.get("passes", []))
            and not _spread_sweep((sweep_ctx or {}).get("command_line", "")))


def _spread_sweep(command_line):
    """Whether zb_collectives' --footprint (one size or a list) spread any of its calls."""
    m = re.search(r"--footprint=(\S+)", command_line)
    return bool(m) and any(float(re.match(r"[\d.]*", x).group() or 0) > 0 for x in m.group(1).split(","))


def _measured_row(results, name):
    """The zero.json (or pipeline.json) benchmark a prediction was held against, with its file's
    context; (None, {}) if absent."""
    for fname in ("zero.json", "pipeline.json"):
        path = os.path.join(results, fname)
        if os.path.isfile(path):
            try:
                ctx, runs = gbjson.load_gb(path)
            except gbjson.InputError:
                continue
            # Named alike but for how many iterations each timed (Google Benchmark's suffix).
            bare = {k.split("/iterations:")[0]: v for k, v in gbjson.representative(runs).items()}
            if name.split("/iterations:")[0] in bare:
                return bare[name.split("/iterations:")[0]], ctx or {}
    return None, {}


def _cores_outnumbered(m, m_ctx):
    """(ranks a node, cores a node) where the measured step's CPU ranks outnumbered their node's
    cores, else None."""
    cores = m_ctx.get("num_cpus")
    per_node, cores = m.value("ranks_per_node"), float(cores) if isinstance(cores, (int, float)) else math.nan
    if m_ctx.get("backend") in ("mpi", "gloo") and _finite(per_node, cores) and per_node > cores > 0:
        return per_node, cores
    return None


def _exposed_allowed(measured):
    """How far a predicted exposed time may sit from the measured one, in seconds."""
    if measured < tol.PREDICTION_EXPOSED_SMALL_S:
        return tol.PREDICTION_EXPOSED_ABS_S
    return tol.PREDICTION_EXPOSED_REL * measured


def _prediction_why(ctx, p, results, off_s, exposed, table=None):
    sweep, sweep_ctx, sweep_runs = _sweep(results, ctx)
    noise = _sweep_noise(sweep_runs)
    if p.value("extrapolated") == 1:
        return "some of the step's collectives are larger than the sweep's largest size (extrapolated)"
    if p.value("modelled") == 1:
        return ("some collectives were priced from a tier's fitted link, not read off the sweep (`modelled`: "
                "more ranks or another node shape than swept)")
    m, m_ctx = _measured_row(results, p.name) if exposed else (None, {})
    skew = m.value("skew_wait_s") if m is not None else math.nan
    # The model predicts the skew that the kernels' rank_spread makes; older results have none.
    predicted_skew = p.value("skew_wait_s_predicted")
    beyond = skew - (predicted_skew if _finite(predicted_skew) else 0.0)
    if exposed and _finite(beyond, off_s) and off_s < 0 and beyond >= abs(off_s) / 2:
        late = m.value("late_rank")
        who = f" (rank {late:.0f} most often)" if _finite(late) and late >= 0 else ""
        modelled = (f", {predicted_skew * 1e3:.2f} ms of it predicted from the kernels' `rank_spread`"
                    if _finite(predicted_skew) and predicted_skew > 0 else "")
        return (f"{skew * 1e3:.2f} ms of the measured exposed time was waiting for a late rank{who} "
                f"(`skew_wait_s`){modelled}: the ranks drifted apart more than their kernels' speeds say")
    # The model's wire is the transfer; a rank that finished its collectives after another had
    # (its communication thread without a core) waited for something the model does not have.
    late_finish = m.value("late_finish_wait_s") if m is not None else math.nan
    shared = _cores_outnumbered(m, m_ctx) if m is not None else None
    if exposed and shared and _finite(off_s) and off_s < 0:
        after = (f"; {late_finish * 1e3:.2f} ms of its exposed time came after another rank had finished the "
                 "same collectives (`late_finish_wait_s`)" if _finite(late_finish) and late_finish > 0 else "")
        return (f"{shared[0]:.0f} CPU ranks shared {shared[1]:.0f} cores: a rank whose collective ends while "
                "other ranks' compute holds every core waits for one, a scheduler's delay the model does not "
                f"price and one that differs from run to run{after} (docs/predict.md)")
    if exposed and _finite(late_finish, off_s) and off_s < 0 and late_finish >= abs(off_s) / 2:
        return (f"{late_finish * 1e3:.2f} ms of the measured exposed time came after another rank had "
                "already finished the same collectives (`late_finish_wait_s`): this rank's own progress "
                "was behind, on CPUs its communication thread waiting for a core (docs/predict.md)")
    noisy = _finite(noise) and noise > tol.PREDICTION_COMM_REL
    noise_why = (f"the sweep's bare calls moved up to {noise:.0%} between two runs of the same call "
                 f"(`bare_repeat_ratio` in {sweep}): this machine's noise is above the bar")
    if not exposed and _warm_gathers(ctx, p, table, sweep_ctx, off_s):
        warm = (f"on CPU ranks of one node {sweep or 'the sweep'} ran each size's calls on the same "
                "buffers, warm in the caches, where the step's gathers each read their own layer's "
                "data: stages that gather come out short (docs/predict.md)")
        return warm + ("; and " + noise_why if noisy else "")
    if noisy:
        return noise_why
    if exposed:
        return NO_CAUSE + " (`zb_predict --measured=... --explain` lines the step up against its trace)"
    return NO_CAUSE + (" (`zb_zero --trace-round=comm` traces the round with communication alone; "
                       "`zb_predict --measured=... --explain` lines it up against the replay)")


def check_prediction(ctx, p, results, table=None):
    c = p.value("comm_error")
    if _finite(c) and abs(c) > tol.PREDICTION_COMM_REL:
        pm, mm = p.value("comm_s_predicted"), p.value("comm_s_measured")
        times = f" ({pm * 1e3:.2f} ms predicted, {mm * 1e3:.2f} measured)" if _finite(pm, mm) else ""
        yield (4, f"communication predicted more than {tol.PREDICTION_COMM_REL:.0%} off (`comm_error`)",
               _pct(c) + times,
               _prediction_why(ctx, p, results, pm - mm if _finite(pm, mm) else math.nan, False, table))
    pe, me = p.value("exposed_comm_s_predicted"), p.value("exposed_comm_s_measured")
    if _finite(pe, me) and abs(pe - me) > _exposed_allowed(me):
        e = p.value("exposed_error")
        shown = (_pct(e) + " " if _finite(e) else "") + f"({pe * 1e3:.2f} ms predicted, {me * 1e3:.2f} measured)"
        yield (4, f"exposed communication predicted more than {tol.PREDICTION_EXPOSED_REL:.0%} off, or more than "
               f"{tol.PREDICTION_EXPOSED_ABS_S * 1e3:g} ms where under {tol.PREDICTION_EXPOSED_SMALL_S * 1e3:g} ms "
               "(`exposed_error`)", shown, _prediction_why(ctx, p, results, pe - me, True))


def check_overhead(ctx, p):
    o = p.value("overhead_ratio")
    if not _finite(o) or o <= 1 + tol.OVERHEAD_REL:
        return
    repeat = p.value("bare_repeat_ratio")
    if "--progress=thread" in (ctx or {}).get("command_line", ""):
        why = ("each call is handed to the communication thread (--progress=thread), and ours "
               "includes the hand-off")
    elif _finite(repeat) and abs(repeat - 1) > tol.OVERHEAD_REL:
        why = (f"the bare call moved as much against itself in the same run (`bare_repeat_ratio` "
               f"beyond 1 ± {tol.OVERHEAD_REL:g}): this machine's noise")
    elif _finite(repeat):
        why = (f"more than this machine's noise as the bare call measured it (`bare_repeat_ratio` "
               f"within 1 ± {tol.OVERHEAD_REL:g})")
    else:
        why = NO_CAUSE
    shown = f"{o:.2f}" + (f" (bare {repeat:.2f})" if _finite(repeat) else "")
    yield (5, f"collective slower than the bare library call (`overhead_ratio` above "
           f"{1 + tol.OVERHEAD_REL:g})", shown, why)


def _labeler(picks):
    """A short name per benchmark: what varies between the file's benchmarks."""
    picks = list(picks)
    families = {p.family for p in picks}
    keys = []
    for p in picks:
        keys += [k for k in p.params if k not in keys and k not in NOT_LABELS]
    keys = [k for k in keys if len({p.params.get(k) for p in picks}) > 1]

    def label(p):
        parts = [p.family] if len(families) > 1 else []
        for k in keys:
            v = p.params.get(k)
            if k == "bytes" and gbjson.number(v) is not None:
                parts.append(size_text(gbjson.number(v)))
            elif k == "footprint" and gbjson.number(v) is not None:
                parts.append("spread over " + size_text(gbjson.number(v)))
            elif k == "stage":
                parts.append(v or "")
            elif v is not None:
                parts.append(f"{k}:{v}" if v else k)
        return " ".join(x for x in parts if x) or p.name.split("/iterations:")[0]
    return label


def file_findings(results, fname):
    """Every finding of one results file ([] for files that are not Google Benchmark's)."""
    path = os.path.join(results, fname)
    try:
        doc = gbjson.load_json(path)
    except gbjson.InputError:
        return []  # the section that reads it says so; other JSON (a trace cut short) is no result
    if not gbjson.is_gb(doc):
        return []
    ctx, runs = gbjson.parse_gb(path, doc)
    table = by_name(parse(path, ctx))
    picks = list(gbjson.representative(runs).values())
    failed = {r.run_name: r for r in runs if r.error}
    label = _labeler(picks + list(failed.values()))
    out = [Finding("a benchmark stopped with an error", fname, label(r), "", f"it said: {r.error}", 0)
           for r in failed.values()]
    for p in picks:
        found = [*check_wrong(ctx, p), *check_books(ctx, p, table), *check_memory(ctx, p),
                 *check_sockets(ctx, p), *check_links(ctx, p), *check_prediction(ctx, p, results, table),
                 *check_overhead(ctx, p)]
        out += [Finding(check, fname, label(p), value, why, order) for order, check, value, why in found]
    return out


def findings(results):
    """Every finding in every results file of the folder."""
    out = []
    for path in sorted(glob.glob(os.path.join(glob.escape(results), "*.json"))):
        out += file_findings(results, os.path.basename(path))
    return sorted(out, key=lambda f: f.order)  # stable: files, then benchmarks, in their order


def grouped(found):
    """[(check, file, reason, [findings])] in the order found."""
    groups = {}
    for f in found:
        groups.setdefault((f.check, f.file, f.reason), []).append(f)
    return [(c, fl, r, fs) for (c, fl, r), fs in groups.items()]


def _line(check, fname, reason, items, limit=None):
    shown = items if limit is None else items[:limit]
    names = ", ".join(f"{f.item} {f.value}".strip() for f in shown)
    more = (f" and {len(items) - len(shown)} more (see [Every check](#every-check))"
            if len(shown) < len(items) else "")
    return f"- **{check}** in {fname}: {names}{more}. Why: {reason}."


def first_screen_lines(found, budget):
    """The "check these" list in at most `budget` lines, and whether anything was left out."""
    if not found:
        return ["- None: every value is within its tolerance (plots/tolerances.py)."], False
    groups = grouped(found)
    cut = len(groups) > budget
    shown = groups[:budget - 1] if cut else groups
    lines = [_line(c, fl, r, items, ITEMS_PER_LINE) for c, fl, r, items in shown]
    cut = cut or any(len(items) > ITEMS_PER_LINE for *_, items in shown)
    if len(groups) > len(shown):
        lines.append(f"- And {len(groups) - len(shown)} more kinds of finding: see "
                     "[Every check](#every-check) below.")
    return lines, cut


def every_check_section(found):
    """Every finding, one line per kind and file, each with every item: below the first screen."""
    return ["## Every check", ""] + [_line(*g) for g in grouped(found)] + [""]
