#!/usr/bin/env python3
"""tools/ab_trials.py: how often the A/B gate passes unchanged code and catches a planted
slowdown. Runs tools/ab.sh N times per kind, alternating the kinds, and tallies the verdicts.

usage: tools/ab_trials.py [options] -- AB_SH_ARGS...
       tools/ab_trials.py --tally=DIR

AB_SH_ARGS are tools/ab.sh's own (the CI form, docs/regression.md), for example
  tools/ab_trials.py --trials=20 -- --pairs=10 --only=collectives,zero,optimizer \
      --cmake=-DZB_CUDA=OFF HEAD HEAD -- --quick
Kinds:
  aa       the arguments as given: both sides the same code; a trial passes when the gate
           passes (what ab.sh's exit 0 means)
  planted  B also slows every OP collective (--b-args=collectives=--fault-slow=OP:F) and every
           full step of STAGE (--b-args=zero=--fault-slow-stage=STAGE:F), each only in its own
           run, so one trial tries both; each plant is caught when a gated timing of it is a
           REGRESSION, and counts only when nothing else fails (no other gated timing, no exact
           metric, no lost benchmark, no failed run); a plant whose family --only leaves out is
           not tried (n/a in trials.csv) and not counted

options:
  --trials=N        trials of each kind (default 20; 3 is a check that the commands work, and
                    what it shows is in trials.md's Wilson intervals)
  --kinds=K,K       aa, planted or both (default aa,planted)
  --fraction=F      the planted slowdown (default 0.1: 10%)
  --op=OP           the collective slowed (default all_reduce)
  --stage=STAGE     the stage slowed (default z2)
  --out=DIR         where the trials go (default results/ab_trials_<UTC stamp>)
  --tally=DIR       run nothing: judge DIR's finished trials again with this checkout's gate
                    (after a change of plots/ab/ab_gate.py, or of GATED) and rewrite its tally
  -h, --help        this text

Writes DIR/options.json (these options, for --tally), DIR/<kind>_<NN>/ (ab.sh's folder and
ab.log), DIR/trials.csv (a line per trial, with its wall time: the CI form's, builds included)
and DIR/trials.md (the counts with their 95% Wilson intervals, and the same rates over 10,000
trials resampled from the finished trials' own pairs); prints trials.md. Exit 0 when
the trials ran (whatever the counts), 2 on bad options or a DIR that --tally cannot read.
"""

import csv
import io
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "plots", "ab"), os.path.join(ROOT, "plots")]
import ab  # noqa: E402
import gbjson  # noqa: E402
from ab_gate import judge, regressed  # noqa: E402
from ab_rows import load, rows as ab_rows  # noqa: E402
from ab_stats import FAILING  # noqa: E402

AB_OPTS = ("--threshold=", "--error=", "--confidence=", "--undecided=", "--tolerance=")
FIELDS = ["kind", "trial", "rc", "seconds", "ok", "stage", "else"]
FAILED_RUNS = "benchmark run(s) failed"  # what ab.sh logs when a benchmark run failed


def die(message):
    print(f"ab_trials: {message}", file=sys.stderr)
    sys.exit(2)


def parse(argv):
    o = {"trials": 20, "kinds": ["aa", "planted"], "fraction": 0.1, "op": "all_reduce",
         "stage": "z2", "out": "", "ab": [], "tally": ""}
    cut = argv.index("--") if "--" in argv else len(argv)
    if any(a in ("-h", "--help") for a in argv[:cut]):
        print(__doc__.strip())
        sys.exit(0)
    o["ab"] = argv[cut + 1:]
    for arg in argv[:cut]:
        name, _, value = arg.partition("=")
        if name == "--trials" and value.isdigit() and int(value) > 0:
            o["trials"] = int(value)
        elif name == "--kinds" and value and set(value.split(",")) <= {"aa", "planted"}:
            o["kinds"] = list(dict.fromkeys(value.split(",")))
        elif name == "--fraction":
            try:
                o["fraction"] = float(value)
            except ValueError:
                die(f"--fraction must be a number > 0, not '{value}'")
            if not o["fraction"] > 0:
                die(f"--fraction must be a number > 0, not '{value}'")
        elif name in ("--op", "--stage", "--out", "--tally") and value:
            o[name[2:]] = value
        else:
            die(f"bad option '{arg}' (see --help)")
    if o["tally"]:
        if len(argv) != 1:
            die("--tally=DIR takes no other option")
        return o
    if "--" not in argv:
        die("expected [options] -- AB_SH_ARGS, or --tally=DIR (see --help)")
    if not o["ab"] or any(a.startswith("--out=") for a in o["ab"]):
        die("AB_SH_ARGS must name the revisions and leave --out to this script")
    return o


def wilson(k, n, z=1.959964):
    """The 95% Wilson score interval of a proportion k/n."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, mid - half), min(1.0, mid + half)


def gate_args(folder, ab_args):
    """ab.py's options (threshold, error, ...) among ab_args, as ab.py reads them for folder."""
    return ab.parse_args([folder, "--no-figures"] + [a for a in ab_args if a.startswith(AB_OPTS)])


def judged(folder, ab_args):
    """(rows, the gated timings that fail the run for being too noisy to judge) of a finished
    trial, judged as ab.py judges a folder with the ab.py options among ab_args (none but with
    --undecided=fail)."""
    args = gate_args(folder, ab_args)
    names, sides = load(folder)
    rows = ab_rows(names, sides, args.threshold, args.confidence, args.tolerances)
    gate = judge(rows, len(names), args.threshold, args.error)
    return rows, gate.blind if args.undecided == "fail" else []


NOT_TRIED = "n/a"  # a plant whose run the trial did not hold (ab.sh --only left its family out)


def tally(kind, rows, blind, failed_runs, o):
    """(passed or caught collective, caught stage, what else failed) of one trial: True or
    False, None for the stage of an A/A trial, NOT_TRIED for a plant whose gated timings the
    trial did not measure. blind: the gated timings that failed the run as too noisy."""
    failing = [r for r in rows if r.verdict in FAILING] + list(blind)
    if kind == "aa":
        why = [f"{r.benchmark} {r.metric} {r.verdict}" for r in failing]
        if failed_runs:
            why.append("a benchmark run failed")
        return not failing and not failed_runs, None, "; ".join(why)
    caught = [r for r in failing if r.gated and r.verdict == "REGRESSION"]  # not a blind one
    coll = [r for r in caught if r.benchmark.startswith(o["op"] + "/")]
    stage = [r for r in caught if r.metric == "step_s" and r.benchmark.startswith(f"zero/stage:{o['stage']}/")]
    other = [r for r in failing if r not in coll and r not in stage]
    clean = not other and not failed_runs
    why = [f"{r.benchmark} {r.metric} {r.verdict}" for r in other]
    if failed_runs:
        why.append("a benchmark run failed")
    tried_coll = any(r.gated and r.benchmark.startswith(o["op"] + "/") for r in rows)
    tried_stage = any(r.gated and r.metric == "step_s" and r.benchmark.startswith(f"zero/stage:{o['stage']}/")
                      for r in rows)
    return (bool(coll) and clean if tried_coll else NOT_TRIED,
            bool(stage) and clean if tried_stage else NOT_TRIED, "; ".join(why))


# Resampled trials: how many, and the seed, so that the same folder always gives the same rates.
RESAMPLES = 10000
SEED = 20261202


def pooled(folders, ab_args):
    """(keys, pairs per trial, matrix) of finished trials' gated timings: keys (file,
    benchmark, metric) measured in every one of the folders, and their per-pair log worsening
    side by side, a row per key and a column per pair of any trial."""
    per_trial, n_pairs = [], []
    for folder in folders:
        names, sides = load(folder)
        args = gate_args(folder, ab_args)
        rows = ab_rows(names, sides, args.threshold, args.confidence, args.tolerances)
        per_trial.append({(r.file, r.benchmark, r.metric): r.worse for r in rows if r.gated})
        n_pairs.append(len(names))
    keys = sorted(set.intersection(*(set(t) for t in per_trial))) if per_trial else []
    x = np.array([[w for t in per_trial for w in t[k]] for k in keys], dtype=float)
    return keys, n_pairs, x


def plant_masks(keys, op, stage):
    """Which keys (file, benchmark, metric) a planted slower `op` and a planted slower `stage`
    step move: the op's gated timings, the stage's step_s."""
    is_op = np.array([b.startswith(op + "/") for _, b, _ in keys], dtype=bool)
    is_stage = np.array([m == "step_s" and b.startswith(f"zero/stage:{stage}/") for _, b, m in keys],
                        dtype=bool)
    return is_op, is_stage


def resample(keys, x, n_pairs, threshold, error, op, stage, draws=RESAMPLES, seed=SEED):
    """Shares of `draws` trials of n_pairs pairs each, drawn with replacement from the pooled
    pairs x (a row per key): (no gated timing failed, `op` caught and nothing else, `stage`'s
    step caught and nothing else), judged by the gate's own code (ab_gate.regressed). A pair
    keeps every metric it measured together, so what the metrics share in a run stays shared."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, x.shape[1], size=(draws, n_pairs))
    flagged = regressed(np.transpose(x[:, picks], (1, 0, 2)), threshold, error)  # draws x keys
    is_op, is_stage = plant_masks(keys, op, stage)
    other = flagged[:, ~(is_op | is_stage)].any(axis=1)
    return (float(np.mean(~flagged.any(axis=1))),
            float(np.mean(flagged[:, is_op].any(axis=1) & ~other)) if is_op.any() else math.nan,
            float(np.mean(flagged[:, is_stage].any(axis=1) & ~other)) if is_stage.any() else math.nan)


def resampled_lines(lines, o):
    """trials.md's paragraph on trials resampled from the finished trials' own pairs."""
    out = []
    for kind in o["kinds"]:
        folders = [os.path.join(o["out"], f"{x['kind']}_{x['trial']:02d}") for x in lines
                   if x["kind"] == kind and x["ok"] != ""]
        if not folders:
            continue
        keys, n_pairs, x = pooled(folders, o["ab"])
        if not keys:
            continue
        n = sorted(n_pairs)[len(n_pairs) // 2]
        # What the code does not change changes nothing: each such timing's pool is moved so
        # that its median pair is no change, keeping its spread, its wild pairs and what the
        # timings share (its mean would be pulled by a wild pair and leave the typical pairs
        # off zero). In planted trials the plants' own timings keep their pairs as measured.
        still = np.ones(len(keys), dtype=bool)
        if kind == "planted":
            still = ~np.logical_or(*plant_masks(keys, o["op"], o["stage"]))
        x = np.where(still[:, None], x - np.nanmedian(x, axis=1, keepdims=True), x)
        args = gate_args(folders[0], o["ab"])
        clean, op, stage = resample(keys, x, n, args.threshold, args.error, o["op"], o["stage"])
        where = (f"{RESAMPLES:,} trials of {n} pairs drawn with replacement from the {x.shape[1]} "
                 f"{'A/A' if kind == 'aa' else 'planted'} pairs of {len(folders)} trials")
        if kind == "aa":
            out.append(f"- {where}, each timing's median pair made no change: no gated timing "
                       f"failed in {clean:.1%} of them.")
        else:
            out.append(f"- {where}, the other timings' median pair made no change: {o['op']} "
                       f"caught and nothing else in {op:.1%}, {o['stage']} step caught and "
                       f"nothing else in {stage:.1%}.")
    if out:
        out = ["Resampled (the gated timings only: exact metrics and lost benchmarks are the real "
               "trials' to count):", ""] + out
    return out


def _cell(v):
    """A tally's value as trials.csv holds it: 1, 0, NOT_TRIED, or empty for none."""
    return "" if v is None else v if v == NOT_TRIED else int(v)


def outcome(line, folder, o):
    """Fills line's ok, stage and else from the trial's folder (left empty when it holds no
    report: ab.sh stopped before judging)."""
    try:
        with open(os.path.join(folder, "ab.log"), encoding="utf-8") as log:
            failed_runs = FAILED_RUNS in log.read()
        if not os.path.exists(os.path.join(folder, "ab.md")):
            raise gbjson.InputError("no ab.md")
        rows, blind = judged(folder, o["ab"])
    except (OSError, gbjson.InputError) as e:
        line.update(ok="", stage="", **{"else": f"ab.sh exit {line['rc']} ({e}): see {folder}/ab.log"})
        return line
    a, b, why = tally(line["kind"], rows, blind, failed_runs, o)
    line.update(ok=_cell(a), stage=_cell(b), **{"else": why})
    return line


def run_trial(kind, i, o):
    folder = os.path.join(o["out"], f"{kind}_{i:02d}")
    extra = []
    if kind == "planted":
        f = o["fraction"]
        extra = [f"--b-args=collectives=--fault-slow={o['op']}:{f:g}",
                 f"--b-args=zero=--fault-slow-stage={o['stage']}:{f:g}"]
    cmd = [os.path.join(ROOT, "tools", "ab.sh"), f"--out={folder}"] + extra + o["ab"]
    os.makedirs(folder, exist_ok=True)
    t0 = time.monotonic()
    with open(os.path.join(folder, "ab.log"), "w", encoding="utf-8") as log:
        rc = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT).returncode
    line = {"kind": kind, "trial": i, "rc": rc, "seconds": round(time.monotonic() - t0)}
    return outcome(line, folder, o)


def report(lines, o):
    out = ["# A/B gate trials", "", f"ab.sh {' '.join(o['ab'])}", ""]
    if "planted" in o["kinds"]:
        out += [f"planted in B: every {o['op']} {o['fraction'] * 100:g}% longer (collectives run), "
                f"every full {o['stage']} step {o['fraction'] * 100:g}% longer (zero run)", ""]
    out += ["| what | count | of | 95% Wilson interval |", "|---|---|---|---|"]
    done = [x for x in lines if x["ok"] != ""]
    for kind, col, what in (("aa", "ok", "A/A runs that passed"),
                            ("planted", "ok", f"{o['op']} caught, nothing else failed"),
                            ("planted", "stage", f"{o['stage']} step caught, nothing else failed")):
        picked = [x for x in done if x["kind"] == kind and x[col] != NOT_TRIED]
        if kind in o["kinds"]:
            k = sum(int(x[col]) for x in picked)
            lo, hi = wilson(k, len(picked))
            span = f"{lo:.2f} to {hi:.2f}" if picked else "-"
            out.append(f"| {what} | {k} | {len(picked)} | {span} |")
    out += ["", "A count shows a rate of at least 95% (19 in 20) only when its interval's lower "
            "end reaches 0.95, which takes 73 of 73; a lower end below it asks for more trials, "
            "while an upper end below 0.95 shows the rate is short of it."]
    resampled = resampled_lines(lines, o)
    if resampled:
        out += [""] + resampled
    times = sorted(x["seconds"] for x in lines)
    if times:
        out += ["", f"Wall time per trial (the CI form, builds included): {times[0]} to "
                f"{times[-1]} s, median {times[len(times) // 2]} s."]
    broken = [x for x in lines if x["ok"] == ""]
    if broken:
        out += ["", f"{len(broken)} trials did not finish: " + "; ".join(x["else"] for x in broken)]
    return "\n".join(out) + "\n"


def save(lines, o):
    """trials.csv and trials.md, each rewritten whole, so an interrupted tally keeps what it had."""
    table = io.StringIO(newline="")
    w = csv.DictWriter(table, fieldnames=FIELDS)
    w.writeheader()
    w.writerows(lines)
    ab.write_whole(os.path.join(o["out"], "trials.csv"), table.getvalue())
    text = report(lines, o)
    ab.write_whole(os.path.join(o["out"], "trials.md"), text)
    return text


def retally(folder):
    """Judges the finished trials of folder again; returns trials.md's text."""
    try:
        with open(os.path.join(folder, "options.json"), encoding="utf-8") as f:
            o = json.load(f)
        with open(os.path.join(folder, "trials.csv"), encoding="utf-8", newline="") as f:
            lines = [{k: (int(v) if k in ("trial", "rc", "seconds") else v) for k, v in x.items()}
                     for x in csv.DictReader(f)]
    except (OSError, ValueError, TypeError) as e:
        die(f"--tally: cannot read {folder}/options.json and trials.csv: {e}")
    o["out"] = os.path.abspath(folder)
    for x in lines:
        outcome(x, os.path.join(o["out"], f"{x['kind']}_{x['trial']:02d}"), o)
    return save(lines, o)


def main(argv):
    o = parse(argv)
    if o["tally"]:
        print(retally(o["tally"]), end="")
        return 0
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    o["out"] = os.path.abspath(o["out"] or os.path.join(ROOT, "results", f"ab_trials_{stamp}"))
    os.makedirs(o["out"], exist_ok=True)
    ab.write_whole(os.path.join(o["out"], "options.json"),
                   json.dumps({k: v for k, v in o.items() if k not in ("out", "tally")}, indent=1))
    lines, text = [], ""
    for i in range(1, o["trials"] + 1):
        for kind in o["kinds"]:
            line = run_trial(kind, i, o)
            lines.append(line)
            print(f"ab_trials: {kind} {i}: exit {line['rc']} in {line['seconds']} s"
                  + (f"; else: {line['else']}" if line["else"] else ""), file=sys.stderr, flush=True)
            text = save(lines, o)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
