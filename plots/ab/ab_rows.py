"""Reads the runs of an A/B folder and turns them into one row per benchmark and metric.

AB_DIR/A/<pair>/ and AB_DIR/B/<pair>/ each hold one run of every benchmark family (any
layout below; every Google Benchmark JSON file is found by name). Pairs are matched by
folder name. Within a run, a metric's value is the median of its repetitions.
"""

import math
import os
import statistics
from dataclasses import dataclass

import gbjson
from ab_stats import decide
from compare_rules import FAILING, compare_exact, gated_rule, kind, metric_names, with_new_names


@dataclass
class AbRow:
    """One line of ab.md. ratio/low/high are B/A; detectable is relative (0.05 = 5%).

    worse: a timed metric's log worsening per pair of the folder (log B/A for a time, log A/B
    for a rate; NaN where the pair has no ratio), what the gate tests. gated: why the gate
    fails on this metric ("" when it is only reported); p: its Holm-adjusted p-value."""
    file: str
    benchmark: str
    metric: str
    kind: str
    pairs: int
    ratio: float
    low: float
    high: float
    detectable: float
    verdict: str
    note: str = ""
    worse: tuple = ()
    gated: str = ""
    p: float = math.nan
    lost: int = 0  # pairs where B has no usable value and A has one


def _gb_files(folder):
    """{file name: [Run]} for every Google Benchmark JSON file below folder."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for fname in sorted(f for f in filenames if f.endswith(".json")):
            path = os.path.join(dirpath, fname)
            doc = gbjson.load_json(path)
            if not gbjson.is_gb(doc):
                continue  # manifest.json, plan.json, traces: nothing to time
            if fname in found:
                raise gbjson.InputError(f"{folder}: two files named {fname} in one run")
            found[fname] = with_new_names(*gbjson.parse_gb(path, doc))
    return found


def load(ab_dir):
    """(pair names, {side: {pair: {file: [Run]}}}) for sides "A" and "B"."""
    sides = {}
    for side in ("A", "B"):
        top = os.path.join(ab_dir, side)
        if not os.path.isdir(top):
            raise gbjson.InputError(f"{ab_dir}: no {side}/ folder of runs")
        pairs = sorted(d for d in os.listdir(top) if os.path.isdir(os.path.join(top, d)))
        sides[side] = {p: _gb_files(os.path.join(top, p)) for p in pairs}
    names = sorted(sides["A"])
    if names != sorted(sides["B"]):
        raise gbjson.InputError(f"{ab_dir}: A/ and B/ hold different pairs: "
                                f"{names} and {sorted(sides['B'])}")
    if not names:
        raise gbjson.InputError(f"{ab_dir}: no runs in A/ and B/")
    if not any(sides[s][p] for s in sides for p in names):
        raise gbjson.InputError(f"{ab_dir}: no Google Benchmark JSON files in any run")
    return names, sides


def _by_benchmark(runs):
    """{match key: [Run]} of measurement rows, and {match key: error} of failed ones."""
    samples = {gbjson.match_key(k): v for k, v in gbjson.samples(runs).items()}
    errors = {gbjson.match_key(r.run_name): r.error for r in runs if r.error}
    return samples, errors


def _value(runs, metric, size=False):
    """The median of a run's repetitions; of their sizes for a signed error (size), whose
    median of +0.5, -0.5 and +0.01 would read as close."""
    vals = [abs(v) if size else v for v in (r.value(metric) for r in runs)]
    vals = [v for v in vals if not math.isnan(v)]
    return statistics.median(vals) if vals else math.nan


def _ratio(a, b):
    """B/A, 1 when equal (both 0 included), None when no ratio means anything."""
    if a == b:
        return 1.0
    if a > 0 and b > 0:
        return b / a
    return None


def _timed_row(file, bench, metric, k, a_runs, b_runs, pairs, threshold, confidence, all_pairs):
    ratios, unmeasured, signless, worse, lost = [], 0, 0, {}, 0
    for p in pairs:
        a, b = _value(a_runs[p], metric, k == "error"), _value(b_runs[p], metric, k == "error")
        # B without a usable value where A has one: no value, or none above zero for a time or
        # a rate that A measured above zero (a bandwidth of 0 is a broken run, not a slow one).
        lost += (not math.isnan(a) and math.isnan(b)) or (k != "error" and a > 0 and not b > 0)
        if math.isnan(a) or math.isnan(b):
            unmeasured += 1
            continue
        r = _ratio(a, b)
        if r is None:
            signless += 1
        else:
            ratios.append(r)
            worse[p] = -math.log(r) if k == "higher" else math.log(r)
    if not ratios and not signless:
        return AbRow(file, bench, metric, k, 0, math.nan, math.nan, math.nan, math.nan, "n/a",
                     "not measured", lost=lost)
    d = decide(ratios, k == "higher", threshold, confidence)
    notes = []
    if signless:
        notes.append(f"{signless} pairs with a value <= 0 have no ratio")
    if unmeasured:
        notes.append(f"{unmeasured} pairs not measured")
    # A metric the gate does not judge fails nothing, however much worse.
    verdict = "worse (not gated)" if d.verdict == "REGRESSION" else d.verdict
    return AbRow(file, bench, metric, k, d.pairs, d.ratio, d.low, d.high, d.detectable,
                 verdict, "; ".join(notes), tuple(worse.get(p, math.nan) for p in all_pairs), lost=lost)


def _exact_row(file, bench, metric, a_runs, b_runs, pairs, tolerance):
    a_vals = [r.value(metric) for p in pairs for r in a_runs[p]]
    b_vals = [r.value(metric) for p in pairs for r in b_runs[p]]
    row = compare_exact(bench, metric, a_vals, b_vals, tolerance)
    ratio = row.current / row.baseline if row.baseline else math.nan
    if row.baseline == row.current:
        ratio = 1.0
    return AbRow(file, bench, metric, "exact", len(pairs), ratio, math.nan, math.nan, math.nan,
                 row.verdict, row.note)


def _benchmark_rows(file, bench, a_runs, b_runs, b_errors, threshold, confidence, tolerances,
                    all_pairs):
    lost = sorted(p for p in a_runs if p not in b_runs)
    if lost:
        why = next((b_errors[p] for p in lost if p in b_errors), "")
        verdict = "ERROR" if why else "MISSING"
        note = why or f"not in B's runs of pairs {', '.join(lost)}"
        return [AbRow(file, bench, "-", "", 0, math.nan, math.nan, math.nan, math.nan,
                      verdict, note)]
    pairs = sorted(a_runs)
    metrics = metric_names([r for p in pairs for r in a_runs[p] + b_runs[p]])
    rows = []
    for metric in metrics:
        k = kind(metric, tolerances)
        if k is None:
            continue
        in_a = metric == "real_time" or any(metric in r.counters for p in pairs for r in a_runs[p])
        in_b = metric == "real_time" or any(metric in r.counters for p in pairs for r in b_runs[p])
        if not in_b:
            rows.append(AbRow(file, bench, metric, k, 0, math.nan, math.nan, math.nan, math.nan,
                              "MISSING", "metric gone from B"))
        elif not in_a:
            rows.append(AbRow(file, bench, metric, k, 0, math.nan, math.nan, math.nan, math.nan,
                              "new"))
        elif k == "exact":
            rows.append(_exact_row(file, bench, metric, a_runs, b_runs, pairs,
                                   tolerances.get(metric, 0.0)))
        else:
            rows.append(_timed_row(file, bench, metric, k, a_runs, b_runs, pairs, threshold,
                                   confidence, all_pairs))
    return rows


def rows(pair_names, sides, threshold, confidence, tolerances):
    """Every row, file by file in name order, benchmarks in the order A's runs list them."""
    files = sorted({f for s in sides.values() for runs in s.values() for f in runs})
    out = []
    for file in files:
        per_bench = {}  # {match key: ({pair: A runs}, {pair: B runs}, {pair: B error})}
        for p in pair_names:
            for side, i in (("A", 0), ("B", 1)):
                samples, errors = _by_benchmark(sides[side][p].get(file, []))
                for name, runs in samples.items():
                    per_bench.setdefault(name, ({}, {}, {}))[i][p] = runs
                if side == "B":
                    for name, err in errors.items():
                        per_bench.setdefault(name, ({}, {}, {}))[2][p] = err
        for bench, (a_runs, b_runs, b_errors) in per_bench.items():
            if not a_runs:
                if b_runs:
                    out.append(AbRow(file, bench, "-", "", 0, math.nan, math.nan, math.nan,
                                     math.nan, "new"))
                continue
            out += _benchmark_rows(file, bench, a_runs, b_runs, b_errors, threshold, confidence,
                                   tolerances, pair_names)
    for r in out:
        rule = gated_rule(r.file, r.benchmark, r.metric)
        if not (rule and r.kind in ("lower", "higher")) or r.verdict in FAILING:
            continue  # a gated timing B lost fails as lost, not as a timing
        if r.lost:
            r.verdict, r.note = "MISSING", f"B has no usable value in {r.lost} pairs where A has one"
            continue
        r.gated = rule.why
    return out

