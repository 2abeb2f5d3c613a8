"""summary.md's "check these" list: every value of every results file that lies outside its
tolerance (plots/tolerances.py), with the reason the tool knows from the files themselves.
The predictions' checks, with their reasons, are in summary_predict_checks.py.

Reads what the C++ wrote and compares; it measures nothing.
"""

import glob
import math
import os
from dataclasses import dataclass

import gbjson
import tolerances as tol
from stage_table import by_name, parse
from summary_format import NO_CAUSE, finite, pct, size_text
from summary_predict_checks import check_host, check_prediction

ITEMS_PER_LINE = 6  # items named on a first-screen line; the rest go to "Every check" below
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


def _bound(v):
    return "0%" if v == 0 else f"{v:+.0%}"


def _rel(measured, reference):
    if reference == 0:
        return 0.0 if measured == 0 else math.copysign(math.inf, measured)
    return measured / reference - 1


def _farthest(rels):
    """The relative difference farthest from 0, and " (farthest of N repetitions)" where N > 1."""
    worst = max(rels, key=abs)
    return worst, f" (farthest of {len(rels)} repetitions)" if len(rels) > 1 else ""


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
    if finite(worst) and worst > tol.WRONG_MAX:
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
    if not finite(b):
        return "no books beside it to tell whether the harness or something else allocated the difference"
    if math.isclose(b, f, rel_tol=tol.BOOKS_REL):
        return ("the tracker's books equal the formula, so the difference was allocated beside the "
                "state (the allocator, a library's buffers)")
    return f"the tracker's books say {b:.3f}: the harness allocates other than the formula"


def check_memory(ctx, p):
    # Against a fixed reference (a formula, the books; the sockets and links below too) every
    # repetition is held to it: one repetition off is off, whatever the median.
    params = p.value("params")
    for measured, reference, books, what in MEMORY:
        pairs = p.each(measured, reference)
        if not pairs:
            continue
        m, f = max(pairs, key=lambda t: abs(t[0] - t[1]))  # the repetition furthest off
        allowed = tol.MEMORY_REL * abs(f)
        if finite(params) and params > 0:
            allowed = max(allowed, tol.MEMORY_SLACK_BYTES / params)
        if abs(m - f) <= allowed:
            continue
        which = f" (farthest of {len(pairs)} repetitions)" if len(pairs) > 1 else ""
        side = "the books" if reference.endswith("_accounted") else "the formula"
        yield (2, f"measured {what} off {side} (`{measured}` against `{reference}`, allowed "
               f"{tol.MEMORY_REL:.0%} or {tol.MEMORY_SLACK_BYTES // 1024} KiB per rank)",
               f"{m:.3f} against {f:.3f}{which}", _memory_why(reference, f, p.value(books) if books else math.nan))


def _padding(p):
    pad = p.value("padding")
    if finite(pad) and pad > 0:
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
    if not finite(formula) and row and one_node and not asked and isinstance(row.get("volume_psi"), (int, float)):
        # The table's volume is one node's: across nodes the node-aware stages add a pass.
        formula, source = float(row["volume_psi"]), "the stage table's volume_psi (one node)"
    pairs.append(("volume_psi_accounted", formula, source, "volume books"))
    for books, f, source, what in pairs:
        b = p.value(books)
        if finite(b, f) and not math.isclose(b, f, rel_tol=tol.BOOKS_REL, abs_tol=1e-12):
            yield (1, f"{what} off the formula (`{books}` against {source})", f"{b:.4f} against {f:.4f}",
                   _padding(p))


def check_sockets(ctx, p):
    for measured, books in (("volume_psi_measured", "volume_psi_accounted"),
                            ("wire_bytes_measured", "wire_bytes_accounted"),
                            ("wire_bytes_measured", "wire_bytes_formula")):
        rels = [_rel(m, b) for m, b in p.each(measured, books)]
        if rels and abs(_farthest(rels)[0]) > tol.SOCKET_REL:
            worst, which = _farthest(rels)
            side = "the ring formula" if books.endswith("_formula") else "the books"
            yield (3, f"bytes at the sockets off {side} (`{measured}` against `{books}`, allowed "
                   f"±{tol.SOCKET_REL:.0%})", pct(worst) + which, _algorithms(ctx))


def check_links(ctx, p):
    for measured, books, what in (("inter_node_bytes_measured", "inter_node_bytes_accounted", "inter-node"),
                                  ("intra_node_bytes_measured", "intra_node_bytes_accounted", "intra-node")):
        rels = [_rel(m, b) for m, b in p.each(measured, books)]
        outside = [r for r in rels if not -tol.LINK_BELOW <= r <= tol.LINK_ABOVE]
        if not outside:
            continue
        # The repetition furthest past its bound: below the payload, or above the headers' allowance.
        r = max(outside, key=lambda x: -tol.LINK_BELOW - x if x < -tol.LINK_BELOW else x - tol.LINK_ABOVE)
        why = _algorithms(ctx) if r > 0 else \
            "below the payload: the counter missed traffic, or the traffic took another path"
        which = f" (of {len(rels)} repetitions, {len(outside)} outside)" if len(rels) > 1 else ""
        yield (3, f"{what} bytes off the rings' books (`{measured}` against `{books}`, allowed "
               f"{_bound(-tol.LINK_BELOW)} to {_bound(tol.LINK_ABOVE)})", pct(r) + which, why)


def check_overhead(ctx, p):
    o = p.value("overhead_ratio")
    if not finite(o) or o <= 1 + tol.OVERHEAD_REL:
        return
    repeat, ours = p.value("bare_repeat_ratio"), p.value("ours_repeat_ratio")
    # The runs go ours, bare, bare, ours. A disturbed run of ours raises the ratio; a disturbed
    # bare run lowers it, so the bare call's repeat can say how noisy the machine was but not
    # explain a high ratio. Without the slower of our two runs the ratio is o * 2 min(1, r) / (1 + r),
    # taken in each repetition and then their median: the medians of o and of r can come from two
    # repetitions, and a repetition whose runs differ either way (r 0.61, or 2.15) is noise.
    def without_slower(o_k, r_k):
        return o_k * 2 * min(1.0, r_k) / (1 + r_k)
    # A file of aggregates only has no repetition to take it in: the ratio is then not trimmed.
    trimmed = p.median_of(without_slower, "overhead_ratio", "ours_repeat_ratio") if p.has_repetitions else math.nan
    # The bare call against itself, in every repetition: a median near 1 can hide 0.6 and 1.9.
    bare_moved = [abs(r - 1) for (r,) in p.each("bare_repeat_ratio")] if p.has_repetitions else []
    if "--progress=thread" in (ctx or {}).get("command_line", ""):
        why = ("each call is handed to the communication thread (--progress=thread), and ours "
               "includes the hand-off")
    elif finite(trimmed) and trimmed <= 1 + tol.OVERHEAD_REL:
        why = (f"our own two runs differ by as much: without the slower of them (`ours_repeat_ratio`) "
               f"the ratio is within {1 + tol.OVERHEAD_REL:g}, this machine's noise")
    elif finite(trimmed):
        why = (f"more than the spread of our two runs explains: without the slower of them "
               f"(`ours_repeat_ratio`) the ratio stays above {1 + tol.OVERHEAD_REL:g}")
    elif bare_moved and max(bare_moved) <= tol.OVERHEAD_REL:
        why = (f"more than this machine's noise as the bare call measured it (`bare_repeat_ratio` "
               f"within 1 ± {tol.OVERHEAD_REL:g} in every repetition)")
    else:
        why = NO_CAUSE
    # What the ratio adds to each call, for a reader to weigh against the collectives a step issues.
    added = p.median_of(lambda o_k, b_k: (o_k - 1) * b_k, "overhead_ratio", "bare_time_s")
    def itself(metric, r):
        lo, hi = p.spread(metric)
        return f"{r:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if p.repetitions > 1 and lo != hi else "")
    selves = [f"{who} {itself(m, r)}" for who, m, r in (("bare", "bare_repeat_ratio", repeat),
                                                         ("ours", "ours_repeat_ratio", ours)) if finite(r)]
    notes = ([f"{_per_call(added)} a call"] if finite(added) else []) + \
            ([f"against itself: {', '.join(selves)}"] if selves else []) + \
            ([f"without our slower run {trimmed:.2f}"] if finite(trimmed) else [])
    shown = f"{o:.2f}" + (f" ({'; '.join(notes)})" if notes else "")
    yield (5, f"collective slower than the bare library call (`overhead_ratio` above "
           f"{1 + tol.OVERHEAD_REL:g})", shown, why)


def _per_call(added):
    """The time an overhead adds to a call, in seconds, as '+66 ns', '+1.2 µs', '+3.4 ms'."""
    for unit, scale, digits in (("ns", 1e-9, 0), ("µs", 1e-6, 1), ("ms", 1e-3, 1)):
        if abs(round(added / scale, digits)) < 1000 or unit == "ms":  # rounded first: no "+1000 ns"
            return f"{added / scale:+.{digits}f} {unit}"


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
                 *check_sockets(ctx, p), *check_links(ctx, p), *check_host(ctx, p),
                 *check_prediction(ctx, p, results, table), *check_overhead(ctx, p)]
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
