#!/usr/bin/env python3
"""Regression comparator: current Google Benchmark results against a baseline, exit 1 if worse."""

import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli  # noqa: E402
import gbjson  # noqa: E402
from compare_rules import (DEFAULT_GATE, DEFAULT_THRESHOLD, TOLERANCE_HELP,  # noqa: E402
                           Row, compare_benchmark, parse_tolerances, with_new_names)

HEADER = ["benchmark", "metric", "baseline", "current", "change", "verdict"]


def _pair_rows(base_runs, cur_runs, threshold, gate, gone="benchmark not in current",
               tolerances=None):
    """Report rows for one pair of Google Benchmark files."""
    base = {gbjson.match_key(k): v for k, v in gbjson.samples(base_runs).items()}
    cur = {gbjson.match_key(k): v for k, v in gbjson.samples(cur_runs).items()}
    errors = {gbjson.match_key(r.run_name): r.error for r in cur_runs if r.error}
    rows = []
    for name, runs in base.items():
        if name in cur:
            rows += compare_benchmark(name, runs, cur[name], threshold, gate, tolerances)
        elif name in errors:
            rows.append(Row(name, "-", math.nan, math.nan, math.nan, "ERROR", errors[name]))
        else:
            rows.append(Row(name, "-", math.nan, math.nan, math.nan, "MISSING", gone))
    for name in cur:
        if name not in base:
            rows.append(Row(name, "-", math.nan, math.nan, math.nan, "new"))
    return rows


def _parsed(path, doc):
    """(context, runs) of a results file, its counters under today's names."""
    ctx, runs = gbjson.parse_gb(path, doc)
    return ctx, with_new_names(ctx, runs)


def _gb_file(path, role):
    doc = gbjson.load_json(path)
    if not gbjson.is_gb(doc):
        raise gbjson.InputError(f"{role} {path}: not Google Benchmark JSON")
    return _parsed(path, doc)


def collect(baseline, current, threshold, gate, tolerances=None):
    """[(title, base context, current context, rows)] for two files or two results folders."""
    if os.path.isdir(baseline) != os.path.isdir(current):
        raise gbjson.InputError(
            f"BASELINE and CURRENT must both be files or both be folders: {baseline}, {current}")
    if not os.path.isdir(baseline):
        bctx, bruns = _gb_file(baseline, "BASELINE")
        cctx, cruns = _gb_file(current, "CURRENT")
        return [("", bctx, cctx, _pair_rows(bruns, cruns, threshold, gate, tolerances=tolerances))]
    sections = []
    base_names = sorted(f for f in os.listdir(baseline) if f.endswith(".json"))
    for fname in base_names:
        doc = gbjson.load_json(os.path.join(baseline, fname))
        if not gbjson.is_gb(doc):
            print(f"compare: note: skipping {fname}: not Google Benchmark JSON", file=sys.stderr)
            continue
        bctx, bruns = _parsed(os.path.join(baseline, fname), doc)
        cpath = os.path.join(current, fname)
        if os.path.exists(cpath):
            cctx, cruns = _gb_file(cpath, "CURRENT")
            rows = _pair_rows(bruns, cruns, threshold, gate, tolerances=tolerances)
        else:
            # Every benchmark of a vanished file is reported missing, which fails.
            cctx, rows = {}, _pair_rows(bruns, [], threshold, gate, f"{fname} not in current",
                                        tolerances)
        sections.append((fname, bctx, cctx, rows))
    known = set(base_names)
    for fname in sorted(f for f in os.listdir(current) if f.endswith(".json")):
        if fname in known:
            continue
        doc = gbjson.load_json(os.path.join(current, fname))
        if gbjson.is_gb(doc):
            cctx, cruns = _parsed(os.path.join(current, fname), doc)
            sections.append((fname, {}, cctx,
                             _pair_rows([], cruns, threshold, gate, tolerances=tolerances)))
    if not sections:
        raise gbjson.InputError(f"no Google Benchmark JSON files in {baseline}")
    return sections


def _num(v):
    return "-" if math.isnan(v) else f"{v:.10g}"


def _change(v):
    if math.isnan(v):
        return ""
    if abs(v) < 5e-4:
        return "+0.0%"  # unit conversion leaves last-bit noise; "-0.0%" would look like a change
    return f"{v * 100:+.1f}%"


def _cells(row):
    metric = "real_time_s" if row.metric == "real_time" else row.metric
    verdict = f"{row.verdict} ({row.note})" if row.note else row.verdict
    return [row.benchmark, metric, _num(row.baseline), _num(row.current),
            _change(row.change), verdict]


def _origin(ctx):
    return ", ".join(str(ctx[k]) for k in ("host_name", "date") if ctx.get(k)) or "-"


def text_table(cells):
    widths = [max(len(r[i]) for r in [HEADER] + cells) for i in range(len(HEADER))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(HEADER, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)


def markdown_table(cells):
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in cells]
    return "\n".join(lines)


def summary(sections, gate, threshold):
    rows = [r for _, _, _, rs in sections for r in rs]
    counts = {}
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    parts = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    failed = sum(r.fails for r in rows)
    status = "FAIL" if failed else "PASS"
    return f"{status}: {parts} (gate={gate}, threshold={threshold * 100:g}%)", failed


def host_speed(rows):
    """The host's speed in each run, by the reference collective its benchmarks timed
    (`reference_s`, the median over them): a line, or "" where either run timed none. Two runs
    of one host far apart here compare two hosts (docs/predict.md)."""
    def median(side):
        values = [getattr(r, side) for r in rows if r.metric == "reference_s" and not math.isnan(getattr(r, side))]
        return statistics.median(values) if values else math.nan
    base, cur = median("baseline"), median("current")
    if math.isnan(base) or math.isnan(cur) or base <= 0:
        return ""
    return (f"host speed: the reference collective (`reference_s`, median over the benchmarks) took "
            f"{base * 1e3:.3f} ms in the baseline, {cur * 1e3:.3f} ms now ({cur / base:.2f}x)")


def render(sections, table, heading):
    out = []
    for title, bctx, cctx, rows in sections:
        if title:
            out.append(heading(title))
        out.append(f"baseline: {_origin(bctx)}; current: {_origin(cctx)}")
        out += [line for line in [host_speed(rows)] if line]
        out.append("")
        out.append(table([_cells(r) for r in rows]) if rows else "(no benchmarks)")
        out.append("")
    return "\n".join(out)


def main(argv=None):
    p = cli.Parser(description=__doc__)
    p.add_argument("baseline", help="Google Benchmark JSON file or results folder")
    p.add_argument("current", help="Google Benchmark JSON file or results folder")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                   help="relative change counted as a regression (default %(default)g)")
    p.add_argument("--markdown", metavar="OUT.md", help="also write the report as Markdown")
    p.add_argument("--gate", choices=["exact", "all"], default=DEFAULT_GATE,
                   help="exact: fail only on exact metrics (default %(default)s: timings of two "
                        "separate runs move with the machine; gate them with tools/ab.sh); "
                        "all: also on timings")
    p.add_argument("--tolerance", action="append", default=[], metavar="METRIC=REL",
                   help=TOLERANCE_HELP)
    args = p.parse_args(argv)
    if not args.threshold >= 0:
        p.error("--threshold must be a number >= 0")
    try:
        tolerances = parse_tolerances(args.tolerance)
    except ValueError as e:
        p.error(str(e))
    try:
        sections = collect(args.baseline, args.current, args.threshold, args.gate, tolerances)
    except gbjson.InputError as e:
        print(f"compare: error: {e}", file=sys.stderr)
        return 2
    line, failed = summary(sections, args.gate, args.threshold)
    print(render(sections, text_table, lambda t: f"== {t} =="))
    print(line)
    if args.markdown:
        md = render(sections, markdown_table, lambda t: f"### {t}")
        try:
            with open(args.markdown, "w", encoding="utf-8") as f:
                f.write(f"## Benchmark comparison\n\n{md}\n**{line}**\n")
        except OSError as e:
            print(f"compare: error: cannot write {args.markdown}: {e}", file=sys.stderr)
            return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
