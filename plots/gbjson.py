"""Reads Google Benchmark JSON (and other results JSON) into records for zbplot and compare."""

import json
import math
import statistics
from dataclasses import dataclass, field

# Seconds per Google Benchmark time_unit.
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}

# Numeric top-level keys that Google Benchmark writes itself; every other
# numeric key of a benchmark row is a user counter.
STANDARD_KEYS = {
    "family_index", "per_family_instance_index", "repetitions",
    "repetition_index", "threads", "iterations", "real_time", "cpu_time",
}

# Name segments that describe how a benchmark was sampled, not what it ran;
# dropped from the matching key so that changing them still compares.
SAMPLING_KEYS = {"repeats"}


class InputError(Exception):
    """An input file that cannot be read or is not in the expected format."""


@dataclass
class Run:
    """One row of the "benchmarks" array."""
    name: str
    run_name: str
    family: str
    params: dict
    run_type: str
    aggregate_name: str
    repetition_index: int
    real_time_s: float
    counters: dict = field(default_factory=dict)
    error: str = ""
    label: str = ""  # Google Benchmark's label, e.g. what a copy really crossed

    def value(self, metric):
        """A counter, or the row's real time for "real_time"; NaN when absent."""
        if metric == "real_time":
            return self.real_time_s
        return self.counters.get(metric, math.nan)


def parse_name(name):
    """Splits "op/key:value/..." into (op, {key: value}); the value keeps any later colons."""
    segments = [s for s in name.split("/") if s]
    family = ""
    params = {}
    for i, seg in enumerate(segments):
        key, sep, val = seg.partition(":")
        if sep:
            params[key] = val
        elif i == 0:
            family = seg
        else:
            # Flags such as Google Benchmark's "real_time" carry no value.
            params[seg] = ""
    return family, params


def match_key(run_name):
    """The run name without sampling segments, used to pair baseline and current."""
    kept = [s for s in run_name.split("/") if s.partition(":")[0] not in SAMPLING_KEYS]
    return "/".join(kept)


def number(text):
    """A name parameter as float, or None when it is not a number."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def load_json(path):
    """Parses a JSON file; InputError on any failure to read or parse."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InputError(f"{path}: cannot read JSON: {e}") from e


def is_gb(doc):
    """Whether a parsed document looks like Google Benchmark output."""
    return (isinstance(doc, dict) and isinstance(doc.get("benchmarks"), list)
            and all(isinstance(b, dict) and isinstance(b.get("name"), str)
                    for b in doc["benchmarks"]))


def _is_number(v):
    # bool is an int subclass in Python but never a counter.
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _row(path, b):
    unit = b.get("time_unit", "ns")
    if unit not in TIME_UNITS:
        raise InputError(f"{path}: benchmark {b['name']!r} has unknown time_unit {unit!r}")
    real = b.get("real_time")
    real_s = float(real) * TIME_UNITS[unit] if _is_number(real) else math.nan
    run_name = b.get("run_name") if isinstance(b.get("run_name"), str) else b["name"]
    family, params = parse_name(run_name)
    counters = {k: float(v) for k, v in b.items()
                if _is_number(v) and k not in STANDARD_KEYS}
    error = ""
    if b.get("error_occurred"):
        error = str(b.get("error_message") or "error")
    rep = b.get("repetition_index")
    return Run(name=b["name"], run_name=run_name, family=family, params=params,
               run_type=str(b.get("run_type", "iteration")),
               aggregate_name=str(b.get("aggregate_name", "")),
               repetition_index=rep if isinstance(rep, int) else 0,
               real_time_s=real_s, counters=counters, error=error,
               label=b["label"] if isinstance(b.get("label"), str) else "")


def parse_gb(path, doc):
    """Turns a parsed Google Benchmark document into (context, [Run])."""
    if not is_gb(doc):
        raise InputError(f"{path}: not Google Benchmark JSON (no 'benchmarks' list of named rows)")
    context = doc.get("context") if isinstance(doc.get("context"), dict) else {}
    return context, [_row(path, b) for b in doc["benchmarks"]]


def load_gb(path):
    """Reads a Google Benchmark JSON file into (context, [Run])."""
    return parse_gb(path, load_json(path))


def samples(runs):
    """Per run name, in file order: the rows that are measurements.

    Iteration rows are the repetitions. A file written with
    --benchmark_report_aggregates_only has none; its median (else mean)
    aggregate then stands in as a single sample.
    """
    out = {}
    aggregates = {}
    for r in runs:
        if r.error:
            continue
        if r.run_type == "aggregate":
            aggregates.setdefault(r.run_name, {})[r.aggregate_name] = r
        else:
            out.setdefault(r.run_name, []).append(r)
    for name, aggs in aggregates.items():
        if name not in out:
            pick = aggs.get("median") or aggs.get("mean")
            if pick is not None:
                out[name] = [pick]
    return out


def representative(runs):
    """One value per metric per benchmark for figures: {run_name: _Pick}.

    Uses Google Benchmark's own median aggregate when present, else the single
    repetition, else the lower median per metric, so that every drawn number
    is one the C++ wrote rather than one computed here.
    """
    medians = {r.run_name: r for r in runs
               if r.run_type == "aggregate" and r.aggregate_name == "median" and not r.error}
    out = {}
    for name, rows in samples(runs).items():
        if name in medians:
            out[name] = _Pick(medians[name], [medians[name]], rows)
        else:
            out[name] = _Pick(rows[0], rows, rows)
    return out


class _Pick:
    """A benchmark as the figures see it: name parts, a value per metric, and its spread."""

    def __init__(self, first, rows, repetitions):
        self.name = first.run_name
        self.family = first.family
        self.params = first.params
        self.label = first.label
        self._rows = rows
        self._reps = [r for r in repetitions if r.run_type != "aggregate"]

    def value(self, metric):
        vals = [r.value(metric) for r in self._rows]
        vals = [v for v in vals if not math.isnan(v)]
        if not vals:
            return math.nan
        return statistics.median_low(vals)

    @property
    def repetitions(self):
        """How many repetitions the value rests on (1 when the file has only aggregates)."""
        return max(1, len(self._reps))

    def spread(self, metric):
        """(lowest, highest) value over the repetitions, as the C++ wrote them; NaNs without."""
        vals = [v for v in (r.value(metric) for r in self._reps) if not math.isnan(v)]
        if not vals:
            v = self.value(metric)
            return v, v
        return min(vals), max(vals)

    @property
    def has_repetitions(self):
        """Whether the file holds the benchmark's repetitions, not only their aggregates."""
        return bool(self._reps)

    def per_repetition(self, *metrics):
        """Each repetition's values of `metrics` together, as tuples, where every one is a number:
        two counters of one repetition belong together, where their medians may come from two."""
        rows = (tuple(r.value(m) for m in metrics) for r in self._reps)
        return [t for t in rows if not any(math.isnan(v) for v in t)]

    def each(self, *metrics):
        """per_repetition(), else the medians as one tuple where the file holds no repetition
        with all of them (a single row, or aggregates only); [] where not even those are numbers."""
        reps = self.per_repetition(*metrics)
        if reps:
            return reps
        values = tuple(self.value(m) for m in metrics)
        return [] if any(math.isnan(v) for v in values) else [values]

    def median_of(self, fn, *metrics):
        """The median (the lower middle of an even count) over the repetitions of fn applied to
        one repetition's values of `metrics`, where a median of each would pair two repetitions;
        fn of the medians where the file holds no repetition with all of them; NaN without."""
        values = [fn(*t) for t in self.each(*metrics)]
        return statistics.median_low(values) if values else math.nan

    def at_median(self, key, *others):
        """(key, *others) of the repetition whose `key` is the median (the lower middle): parts
        of one repetition that add up, where each part's own median need not; the medians where
        the file holds no repetition with all of them."""
        each = sorted(self.each(key, *others))
        return each[(len(each) - 1) // 2] if each else tuple(self.value(m) for m in (key, *others))

    def has(self, metric):
        return any(metric in r.counters for r in self._rows) or metric == "real_time"
