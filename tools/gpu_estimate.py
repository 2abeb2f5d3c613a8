#!/usr/bin/env python3
"""What the GPU check's sizes imply for the default run on an 8-GPU node: the run table's cost
model priced for nccl at 8 ranks, and the same model priced for each of the check's own GPU runs
(one rank) beside the time each really took, so a model far off on this GPU shows."""

import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "plots"))

import gbjson  # noqa: E402  (plots/ is not a package; stdlib only, so it runs on the GPU machine)
import run_cost  # noqa: E402
import run_table  # noqa: E402


def read_runs(path):
    """[(name, seconds, binary, argv)] from the check's runs.tsv: name, seconds, binary, args."""
    runs = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 4:
                raise ValueError(f"{path}: expected 4 tab-separated fields, got {line!r}")
            name, seconds, binary, args = parts
            runs.append((name, float(seconds), binary, args.split()))
    return runs


def benchmark_seconds(path):
    """Each benchmark's own seconds from a check's stamped output (gpu_check.sh's NAME.times:
    seconds, a tab, the line): Google Benchmark prints a row as its benchmark ends, so a row's
    time less the one before is that benchmark's, set-up and check included. The table's head
    waits for the first row (it names the counters), so the first benchmark starts at the line
    before it. Aggregate rows of repetitions end no benchmark and are left out."""
    out, last, before = [], None, 0.0
    with open(path) as f:
        for line in f:
            stamp, _, text = line.rstrip("\n").partition("\t")
            t = float(stamp)
            if last is None:
                if text.startswith("----"):
                    last = before
                before = t
            elif row_params(text) and text.split()[0].rsplit("_", 1)[-1] not in ("mean", "median", "stddev", "cv"):
                out.append(t - last)
                last = t
    return out


def row_params(text):
    """The arguments of a Google Benchmark row (its first word, "family/key:value/..."), or {}
    for any other line: a binary's own table after Google Benchmark's has plain names."""
    if not text[:1].strip() or text.startswith("#") or "/" not in text.split()[0]:
        return {}
    return gbjson.parse_name(text.split()[0])[1]


def sized_words(words, times):
    """A run that names its model by shape (--model=gpt:...) and not by --params: the cost model
    reads --params, so it takes the count and the layers the binary's own rows name."""
    if not any(w.startswith("--model=") for w in words) or any(w.startswith("--params=") for w in words):
        return words
    if os.path.exists(times):
        with open(times) as f:
            for line in f:
                params = row_params(line.rstrip("\n").partition("\t")[2])
                if "params" in params and "layers" in params:
                    return words + [f"--params={params['params']}", f"--layers={params['layers']}"]
    return words


def default_run_s(table, ranks):
    """{family: seconds} of the default run for nccl at `ranks`, from the cost model alone."""
    machine, reps = table.machine["nccl"], table.repetitions["default"]
    per_family = {}
    for run in table.runs:
        words = run.argv("default", "nccl", "/tmp")
        _, s = run_cost.estimate(run.binary, words, run.launch, ranks, reps if run.repetitions else 1,
                                 machine, table.cost)
        per_family[run.family] = per_family.get(run.family, 0.0) + s
    return per_family


def fmt(s):
    return f"{s / 60:.1f} min" if s >= 120 else f"{s:.0f} s"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("runs", nargs="?", help="runs.tsv of a GPU check (name, seconds, binary, args)")
    ap.add_argument("--ranks", type=int, default=8, help="GPUs of the node the estimate is for")
    o = ap.parse_args(argv)
    if o.ranks < 1:
        print("gpu_estimate.py: --ranks must be at least 1", file=sys.stderr)
        return 2
    try:
        table = run_table.load()
        runs = read_runs(o.runs) if o.runs and os.path.exists(o.runs) else []
    except (OSError, ValueError, run_table.TableError) as e:
        print(f"gpu_estimate.py: {e}", file=sys.stderr)
        return 2

    fam = default_run_s(table, o.ranks)
    total = sum(fam.values())
    print(f"default run on {o.ranks} GPUs (nccl), from the cost model of tools/run_table.toml: "
          f"{fmt(total)} of benchmarking ("
          + ", ".join(f"{k} {fmt(v)}" for k, v in fam.items()) + ")")
    model_s = measured_s = 0.0
    for name, seconds, binary, words in runs:
        if not hasattr(run_cost.Model, binary):
            continue
        times = os.path.join(os.path.dirname(o.runs), f"nccl_{name}.times")
        words = sized_words(words, times)
        _, s = run_cost.estimate(binary, words, "single", 1, 1, table.machine["nccl"], table.cost)
        model_s += s
        measured_s += seconds
        line = f"  {name}: model {s:.1f} s at one rank, took {seconds:.0f} s"
        rows = benchmark_seconds(times) if os.path.exists(times) else []
        if rows:
            each = run_cost.per_benchmark(binary, words, "single", 1, 1, table.machine["nccl"], table.cost)
            model_one, took_one = statistics.median(each), statistics.median(rows)
            line += (f"; a benchmark: model {model_one:.2f} s, took {took_one:.2f} s "
                     f"(medians of {len(each)} and {len(rows)})")
        print(line)
    if model_s == 0:
        print("no GPU run of this check passed to hold the model against")
    else:
        k = measured_s / model_s
        print(f"this GPU's runs took {k:.2f}x the model's time; the default run scaled by that: "
              f"{fmt(total * k)} (one GPU cannot show the NVLink term, so this is a guide, not a bound)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
