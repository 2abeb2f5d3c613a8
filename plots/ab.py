#!/usr/bin/env python3
"""A/B comparator: paired runs of two revisions -> ab.md, figures, exit 1 on a regression.

AB_DIR/A/<pair>/ and AB_DIR/B/<pair>/ hold the runs (tools/ab.sh writes them). Every timed
metric is judged on its paired B/A ratios (plots/ab_stats.py); every exact metric must be
equal on all runs of both sides, as plots/compare.py requires.
"""

import argparse
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gbjson  # noqa: E402
import figstyle  # noqa: E402  (selects the Agg backend before any figure is drawn)
import fig_ab  # noqa: E402
from ab_rows import load, rows as ab_rows  # noqa: E402
from ab_stats import DEFAULT_CONFIDENCE, FAILING, MIN_PAIRS, UNDECIDED, order_interval  # noqa: E402
from compare_rules import DEFAULT_THRESHOLD, TOLERANCE_HELP, parse_tolerances  # noqa: E402

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


def summary(rows, threshold, undecided_fails):
    counts = {}
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    parts = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    failed = sum(r.verdict in FAILING for r in rows)
    undecided = sum(r.verdict in UNDECIDED for r in rows)
    bad = failed or (undecided and undecided_fails)
    line = f"{'FAIL' if bad else 'PASS'}: {parts} (threshold {threshold * 100:g}%)"
    if undecided:
        line += (f"; {undecided} metrics undecided at this threshold"
                 f"{' (fails: --undecided=fail)' if undecided_fails else ''}")
    return line, bad


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


def render_md(rows, args, n_pairs, line):
    out = ["## A/B comparison", ""]
    out.append(f"A: {args.a_label}; B: {args.b_label}; {n_pairs} pairs.")
    for note in args.note:
        out.append(f"Note: {note}")
    out += ["", f"Each metric's B/A ratio is taken within each pair (a run of A and a run of B "
            f"side by side), so a machine that drifts slows both. Interval of the median ratio: "
            f"{_interval_text(n_pairs, args.confidence)}. REGRESSION: the interval lies on the "
            f"worse side of 1 and the median is worse by more than {args.threshold * 100:g}%. "
            f"Detectable: the smallest worsening these pairs could have flagged; above the "
            f"threshold, a metric that shows no regression is too noisy to decide.", "",
            f"**{line}**", ""]
    out += _per_file(rows)
    sections = [("Fails the gate", [r for r in rows if r.verdict in FAILING]),
                ("Undecided: too noisy or too few pairs",
                 [r for r in rows if r.verdict in UNDECIDED])]
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


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # One line, exit 2, as for every other bad input.
        print(f"ab: error: {message}", file=sys.stderr)
        sys.exit(2)


def parse_args(argv):
    p = _Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ab_dir", metavar="AB_DIR", help="folder with A/<pair>/ and B/<pair>/ runs")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                   help="relative worsening counted as a regression (default %(default)g)")
    p.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE,
                   help="two-sided coverage asked of the interval (default %(default)g)")
    p.add_argument("--undecided", choices=["pass", "fail"], default="pass",
                   help="exit status when metrics are too noisy to decide and nothing failed "
                        "(default pass: they are listed in ab.md and the summary line)")
    p.add_argument("--tolerance", action="append", default=[], metavar="METRIC=REL",
                   help=TOLERANCE_HELP)
    p.add_argument("--a-label", default="A", help="what side A is (a revision)")
    p.add_argument("--b-label", default="B", help="what side B is")
    p.add_argument("--note", action="append", default=[], help="a line for ab.md; repeatable")
    p.add_argument("--no-figures", action="store_true", help="write ab.md only")
    args = p.parse_args(argv)
    if not args.threshold > 0:
        p.error("--threshold must be a number > 0")
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
    line, bad = summary(rows, args.threshold, args.undecided == "fail")
    # The console gets what fails; ab.md also lists every undecided row, often hundreds on
    # a shared machine, which the summary line counts.
    failing = [r for r in rows if r.verdict in FAILING]
    if failing:
        print(text_table(failing))
    try:
        write_whole(os.path.join(args.ab_dir, "ab.md"), render_md(rows, args, len(names), line))
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
    print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
