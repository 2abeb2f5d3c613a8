#!/usr/bin/env python3
"""A/B comparator: paired runs of two revisions -> ab.md, figures, exit 1 on a regression.

AB_DIR/A/<pair>/ and AB_DIR/B/<pair>/ hold the runs (tools/ab.sh writes them). The gated
timings (plots/compare_rules.py, GATED) are judged together on their paired B/A ratios, so
that unchanged code fails at most at the family-wise error (plots/ab_gate.py); every other
timed metric is judged alone (plots/ab_stats.py) and only reported; every exact metric must be
equal on all runs of both sides, as plots/compare.py requires.
"""

import argparse
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # the gate's modules, then plots/'s shared ones

import cli  # noqa: E402
import gbjson  # noqa: E402
import figstyle  # noqa: E402  (selects the Agg backend before any figure is drawn)
import fig_ab  # noqa: E402
from ab_rows import load, rows as ab_rows  # noqa: E402
from ab_gate import MAX_PAIRS, POWER, judge  # noqa: E402
from ab_stats import DEFAULT_CONFIDENCE, FAILING, MIN_PAIRS, order_interval  # noqa: E402
from compare_rules import DEFAULT_THRESHOLD, GATE_ERROR, TOLERANCE_HELP, parse_tolerances  # noqa: E402

HEADER = ["benchmark", "metric", "pairs", "B/A", "interval", "detectable", "verdict"]


def _num(v, fmt=".4g"):
    return "-" if not isinstance(v, float) or math.isnan(v) else format(v, fmt)


def _cells(r):
    interval = "-" if math.isnan(r.low) else f"{r.low:.4g} .. {r.high:.4g}"
    detectable = "exact" if r.kind == "exact" else (
        "-" if math.isnan(r.detectable) else f"{r.detectable * 100:.1f}%")
    verdict = f"{r.verdict} ({r.note})" if r.note else r.verdict
    metric = "real_time_s" if r.metric == "real_time" else r.metric
    return [r.benchmark, metric, str(r.pairs), _num(r.ratio), interval, detectable, verdict]


def text_table(rows):
    cells = [_cells(r) for r in rows]
    widths = [max(len(c[i]) for c in [HEADER] + cells) for i in range(len(HEADER))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(HEADER, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(cs, widths)).rstrip() for cs in cells]
    return "\n".join(lines)


def markdown_table(rows, with_file=False):
    head = (["file"] if with_file else []) + HEADER
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = ([r.file] if with_file else []) + _cells(r)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def _pct(x):
    return f"{x * 100:.3g}%"


def head(gate, rows, args):
    """(the report's first lines, whether the run fails): the verdict, what each gated metric
    could have detected, and how many pairs would bring them all to the threshold."""
    failing = [r for r in rows if r.verdict in FAILING]
    exact = [r for r in rows if r.kind == "exact"]
    lost = sum(r.verdict in ("MISSING", "ERROR") for r in rows)
    blind = gate.blind if args.undecided == "fail" else []
    bad = bool(failing or blind)
    parts = [f"{len(gate.failed)} of {len(gate.rows)} gated timings regressed",
             f"{sum(r.verdict == 'MISMATCH' for r in exact)} of {len(exact)} exact metrics differ",
             f"{lost} benchmarks or metrics lost"]
    if blind:
        parts.append(f"{len(blind)} gated timings too noisy (fails: --undecided=fail)")
    # Too noisy to judge is not the same as fine: a gated timing whose estimate is itself past
    # the threshold is named in the verdict's line, fail or pass.
    bar = math.log1p(args.threshold)
    dubious = [r for r in gate.blind if r.ratio > 0
               and (math.log(r.ratio) if r.kind == "lower" else -math.log(r.ratio)) > bar]
    if dubious:
        parts.append(f"{len(dubious)} gated timings too noisy to judge though estimated more than "
                     f"{args.threshold * 100:g}% worse: {', '.join(f'{r.benchmark} {r.metric}' for r in dubious)}")
    lines = [f"{'FAIL' if bad else 'PASS'}: {', '.join(parts)} ({gate.pairs} pairs, threshold "
             f"{args.threshold * 100:g}%, family-wise error {args.error * 100:g}%)"]
    seen = sorted(r.detectable for r in gate.rows if not math.isnan(r.detectable))
    if seen:
        reach = sum(d <= args.threshold for d in seen)
        lines.append(f"Detectable (caught in {POWER * 100:g}% of runs) with {gate.pairs} pairs: "
                     f"{_pct(seen[0])} to {_pct(seen[-1])}, per metric below; {reach} of "
                     f"{len(gate.rows)} gated timings reach the {args.threshold * 100:g}% threshold.")
    if gate.rows:
        more = gate.needed - gate.pairs
        if gate.needed > MAX_PAIRS:
            lines.append(f"Pairs: more than {MAX_PAIRS} would be needed for every gated timing to "
                         f"reach {args.threshold * 100:g}% at this spread: rerun on a quieter machine.")
        elif more > 0:
            lines.append(f"Pairs: {gate.needed} ({more} more) would bring every gated timing to "
                         f"{args.threshold * 100:g}% at the spread these pairs show.")
        else:
            lines.append(f"Pairs: these {gate.pairs} bring every gated timing to "
                         f"{args.threshold * 100:g}%.")
    return lines, bad


GATE_HEADER = ["benchmark", "metric", "pairs", "B/A", "interval", "p (Holm)", "detectable",
               "verdict"]


def _gate_cells(r):
    c = _cells(r)
    p = "-" if math.isnan(r.p) else f"{r.p:.2g}"
    return [c[0], c[1], c[2], _num(r.ratio), c[4], p, c[5], c[6]]


def gate_table(gate, markdown):
    """The gated timings, one per line: as text for the console, else as Markdown."""
    cells = [_gate_cells(r) for r in gate.rows]
    if markdown:
        lines = ["| " + " | ".join(GATE_HEADER) + " |", "|" + "---|" * len(GATE_HEADER)]
        return "\n".join(lines + ["| " + " | ".join(c.replace("|", "\\|") for c in cs) + " |"
                                  for cs in cells])
    widths = [max(len(c[i]) for c in [GATE_HEADER] + cells) for i in range(len(GATE_HEADER))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(cs, widths)).rstrip()
                     for cs in [GATE_HEADER] + cells)


def _reported_line(rows):
    counts = {}
    for r in rows:
        if not r.gated and r.kind in ("lower", "higher", "error"):
            counts[r.verdict] = counts.get(r.verdict, 0) + 1
    parts = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    return f"Reported, not gated: {sum(counts.values())} timed metrics: {parts or 'none'}."


def _interval_text(n, confidence):
    k, cov = order_interval(n, confidence)
    ends = "smallest to largest" if k == 1 else f"{k}th smallest to {k}th largest"
    text = f"the {ends} of {n} ratios, {cov * 100:.1f}% coverage"
    if cov < confidence:
        text += f" (below the {confidence * 100:g}% asked: more pairs would give it)"
    return text


def _per_file(rows):
    """Verdicts of the timed metrics per results file: where these runs can gate a timing."""
    timed = [r for r in rows if r.kind in ("lower", "higher")]
    verdicts = sorted({r.verdict for r in timed})
    if not timed:
        return []
    lines = ["Timed metrics per file:", "",
             "| file | " + " | ".join(verdicts) + " |", "|" + "---|" * (len(verdicts) + 1)]
    for file in sorted({r.file for r in timed}):
        counts = [sum(r.file == file and r.verdict == v for r in timed) for v in verdicts]
        lines.append(f"| {file} | " + " | ".join(str(c) for c in counts) + " |")
    return lines + [""]


def render_md(rows, gate, args, lines):
    m = max(len(gate.rows), 1)
    out = ["## A/B gate", "", f"**{lines[0]}**", ""] + [x + "  " for x in lines[1:]] + [""]
    out += [gate_table(gate, markdown=True) if gate.rows else "(no gated timing in these runs)", ""]
    out.append(f"A: {args.a_label}; B: {args.b_label}; {gate.pairs} pairs.")
    for note in args.note:
        out.append(f"Note: {note}")
    out += ["", f"Each metric's B/A ratio is taken within each pair (a run of A and a run of B "
            f"side by side), so a machine that drifts slows both. A gated timing (plots/"
            f"compare_rules.py, GATED) fails when a one-sided paired t-test on its log ratios "
            f"finds it worse beyond chance after Holm's correction over the {len(gate.rows)} gated "
            f"timings (family-wise error {args.error * 100:g}%: the chance that unchanged code "
            f"fails), and its geometric-mean worsening exceeds half the threshold. Its interval: "
            f"the mean ratio's, two-sided at {(1 - 2 * args.error / m) * 100:.3g}% (Holm's first "
            f"level). Detectable: the worsening the gate catches in {POWER * 100:g}% of runs of "
            f"this many pairs at this spread. Every other timed metric is reported, never gated: "
            f"its interval is the median ratio's, {_interval_text(gate.pairs, args.confidence)}; "
            f"worse (not gated) when it lies on the worse side of 1 with the median worse by more "
            f"than {args.threshold * 100:g}%.", "", _reported_line(rows), ""]
    out += _per_file(rows)
    sections = [("Fails the gate", [r for r in rows if r.verdict in FAILING]),
                ("Reported, not gated: worse beyond chance",
                 [r for r in rows if r.verdict == "worse (not gated)"])]
    for title, picked in sections:
        out += [f"### {title}", ""]
        out += [markdown_table(picked, with_file=True) if picked else "(none)", ""]
    out += ["### Every metric", ""]
    for file in sorted({r.file for r in rows}):
        out += [f"#### {file}", "", markdown_table([r for r in rows if r.file == file]), ""]
    return "\n".join(out)


def write_whole(path, text):
    """Writes the file through a temporary one beside it, so it is whole or absent."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".ab.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def parse_args(argv):
    p = cli.Parser(prog="ab", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ab_dir", metavar="AB_DIR", help="folder with A/<pair>/ and B/<pair>/ runs")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                   help="relative worsening the gate must catch; a gated timing worse by less "
                        "than half of it never fails (default %(default)g)")
    p.add_argument("--error", type=float, default=GATE_ERROR,
                   help="family-wise error: the chance that unchanged code fails the gate, over "
                        "all gated timings together (default %(default)g)")
    p.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE,
                   help="two-sided coverage asked of the interval of a metric that is only "
                        "reported (default %(default)g)")
    p.add_argument("--undecided", choices=["pass", "fail"], default="pass",
                   help="exit status when a gated timing could not have caught a regression of "
                        "the threshold and nothing failed (default pass: the report says so)")
    p.add_argument("--tolerance", action="append", default=[], metavar="METRIC=REL",
                   help=TOLERANCE_HELP)
    p.add_argument("--a-label", default="A", help="what side A is (a revision)")
    p.add_argument("--b-label", default="B", help="what side B is")
    p.add_argument("--note", action="append", default=[], help="a line for ab.md; repeatable")
    p.add_argument("--no-figures", action="store_true", help="write ab.md only")
    args = p.parse_args(argv)
    if not args.threshold > 0:
        p.error("--threshold must be a number > 0")
    if not 0 < args.error < 1:
        p.error("--error must be between 0 and 1")
    if not 0 < args.confidence < 1:
        p.error("--confidence must be between 0 and 1")
    try:
        args.tolerances = parse_tolerances(args.tolerance)
    except ValueError as e:
        p.error(str(e))
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        if not os.path.isdir(args.ab_dir):
            raise gbjson.InputError(f"{args.ab_dir} is not a folder")
        names, sides = load(args.ab_dir)
        rows = ab_rows(names, sides, args.threshold, args.confidence, args.tolerances)
    except gbjson.InputError as e:
        print(f"ab: error: {e}", file=sys.stderr)
        return 2
    if len(names) < MIN_PAIRS:
        print(f"ab: error: {len(names)} pairs in {args.ab_dir}; at least {MIN_PAIRS} are needed",
              file=sys.stderr)
        return 2
    gate = judge(rows, len(names), args.threshold, args.error)
    lines, bad = head(gate, rows, args)
    # The console gets the report's first lines and what fails; ab.md every metric.
    print("\n".join(lines))
    if gate.rows:
        print(gate_table(gate, markdown=False))
    failing = [r for r in rows if r.verdict in FAILING and not r.gated]
    if failing:
        print(text_table(failing))
    try:
        write_whole(os.path.join(args.ab_dir, "ab.md"), render_md(rows, gate, args, lines))
    except OSError as e:
        print(f"ab: error: cannot write ab.md: {e}", file=sys.stderr)
        return 2
    if not args.no_figures:
        outdir = os.path.join(args.ab_dir, "figures")
        for file in sorted({r.file for r in rows}):
            stem = "ab_" + os.path.splitext(file)[0]
            try:
                fig_ab.ratios([r for r in rows if r.file == file], outdir, stem, args.threshold)
                print(f"ab: wrote figures/{stem}.{{png,pdf,csv}}")
            except figstyle.NoData as e:
                print(f"ab: note: no figure for {file}: {e}", file=sys.stderr)
    print(lines[0])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
