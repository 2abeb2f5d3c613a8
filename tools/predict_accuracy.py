#!/usr/bin/env python3
"""predict_accuracy.py: zb_predict's accuracy tables (docs/predict.md), measured here: the
one-node errors over repetitions of the default run's configuration, a step's exposed
communication by cause with the schedule-keeping sleep and the old sleep-for, and on
tools/cluster.sh (root) other link rates, more ranks and a quantized configuration's crossing
predicted from one sweep. The one-node table keeps what it measured with --keep and predicts
from it again with --from, to hold two builds of zb_predict to the same measurements."""
import json
import math
import os
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "plots"), os.path.join(ROOT, "tools")]
import cli  # noqa: E402  (one line and exit 2 for a bad option)
from predict_accuracy_cluster import links, more_ranks, quantized  # noqa: E402
from predict_accuracy_common import (KERNEL_RATES, PREDICTED, STAGES, SWEEP, ZERO, die, rows, run,  # noqa: E402
                                     within, without_rank_spread)


def one_node(a, tmp):
    """Median over --reps of the errors per stage, at each rank count: the predictor with
    --compute alone, with the step's own kernels priced (--kernels) but the ranks alike, and
    with the kernels and the skew between ranks (each kernel's rank_spread). Then the same over
    the repetitions whose sweep and step ran at one host speed (zb_predict's host_steady)."""
    # The measured files: in --keep's folder, to predict again later; read from --from's.
    kept = a.from_dir or a.keep or tmp

    def kept_files(ranks, rep):
        return [os.path.join(kept, f"{n}_{ranks}_{rep}.json") for n in ("sweep", "zero", "rates")]

    for ranks in a.ranks if a.from_dir else []:
        for rep in range(a.reps):
            for path in kept_files(ranks, rep):
                if not os.path.isfile(path):
                    die(f"--from={a.from_dir}: no {os.path.basename(path)} (kept by --keep at --ranks={ranks} with "
                        f"--reps above {rep})")
    yields = {}  # ranks -> how the steps' MPI waited, as their results say (zb_zero's context)
    errs = {}  # (ranks, stage) -> per repetition: (its errors, whether sweep and step ran at one host speed)
    tries = {}  # ranks -> how many times each repetition was measured
    for ranks in a.ranks:
        for rep in range(a.reps):
            sweep, zero, rates = kept_files(ranks, rep)
            alike = os.path.join(tmp, f"alike_{ranks}_{rep}.json")
            # Measured again, up to --tries times in all, until the sweep and every stage's
            # step ran at one host speed (zb_predict's host_steady); --from predicts once.
            for attempt in range(1 if a.from_dir else a.tries):
                if not a.from_dir:
                    host = [f"--host-tries={a.host_tries}"] if a.host_tries > 1 else []
                    run(a, ranks, "zb_collectives", [*SWEEP, *a.sweep_flags, *host, f"--json={sweep}"])
                    run(a, ranks, "zb_zero", [*ZERO, *host, "--no-check", f"--json={zero}"])
                    run(a, ranks, "zb_optimizer", [*KERNEL_RATES, *host, f"--json={rates}"])
                without_rank_spread(rates, alike)
                got = []
                for i, kernels in enumerate(([], [f"--kernels={alike}"], [f"--kernels={rates}"])):
                    pred = os.path.join(tmp, f"predict_{ranks}_{rep}_{i}.json")
                    run(a, 0, "zb_predict", [f"--sweep={sweep}", *PREDICTED, *kernels, f"--measured={zero}",
                                             f"--json={pred}"])
                    got.append(rows(pred))
                if all(s.get("host_steady") == 1 for s in got[2].values()):
                    break
            tries.setdefault(ranks, []).append(attempt + 1)
            measured = rows(zero)
            with open(zero) as f:
                yields.setdefault(ranks, set()).add(json.load(f)["context"].get("mpi_yield_when_idle", "not recorded"))
            for stage in got[0]:
                b, k, s = got[0][stage], got[1][stage], got[2][stage]
                errs.setdefault((ranks, stage), []).append((
                    (s["comm_error"], s["exposed_comm_s_measured"], b["exposed_error"], k["exposed_error"],
                     s["exposed_error"], s["exposed_error_s"], s["skew_wait_s_measured"], s["skew_wait_s_predicted"],
                     s["step_s_predicted"] / measured[stage]["step_s"] - 1, s["exposed_comm_s_predicted"],
                     s.get("exposed_per_comm", math.nan)),
                    s.get("host_steady") == 1))
    error_table(errs, steady_only=False)
    # A host whose speed changes between the sweep and the step (a virtual machine's cores moved
    # under it) makes an error of two hosts, not of the model: zb_predict's host_steady says.
    print()
    print("Over the repetitions whose sweep ran at one host speed and whose step ran at the same "
          "(zb_predict's host_steady):")
    print()
    error_table(errs, steady_only=True)
    # Whether Open MPI yielded while a collective waited moves the measured side (docs/zero.md).
    print()
    for ranks in a.ranks:
        print(f"# {ranks} ranks: the steps' mpi_yield_when_idle: {'; '.join(sorted(yields[ranks]))}")
        if not a.from_dir:
            print(f"# {ranks} ranks: measured this many times a repetition (--tries={a.tries}): "
                  f"{', '.join(map(str, tries[ranks]))}")


def error_table(errs, steady_only):
    """The one-node table: a row per rank count and stage, over every repetition or only over
    those whose sweep and step ran at one host speed."""
    header = ("| ranks | stage | reps | comm_error [lowest, highest] | exposed measured (ms) [lowest, highest] "
              "| exposed predicted (ms) [lowest, highest] | per comm | exposed_error: compute alone | kernels "
              "| kernels and skew | exposed_error_s (ms) | skew measured / predicted (ms) | step_error | within |")
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for (ranks, stage), reps in sorted(errs.items(), key=lambda kv: (kv[0][0], STAGES.index(kv[0][1]))):
        error_row(ranks, stage, [e for e, steady in reps if steady or not steady_only])


def error_row(ranks, stage, errs):
    """One stage's row: the median over `errs` (one tuple of errors per repetition) with the
    lowest and highest, and whether it is within the tolerances."""
    if not errs:
        print(f"| {ranks} | {stage} | 0 | - | - | - | - | - | - | - | - | - | - | - |")
        return
    med = [statistics.median(e[i] for e in errs) for i in range(10)]
    lo = [min(e[i] for e in errs) for i in range(10)]
    hi = [max(e[i] for e in errs) for i in range(10)]
    # zb_predict's exposed_per_comm, over the repetitions that have one (NaN where the replay
    # exposed next to nothing); "-" where none has.
    per_comm = [e[10] for e in errs if math.isfinite(e[10])]
    med.append(statistics.median(per_comm) if per_comm else math.nan)
    comm_ok, exposed_ok = within(med[0], med[4], med[5], med[1])
    verdict = "yes" if comm_ok and exposed_ok else (
        ("comm" if not comm_ok else "") + (" exposed" if not exposed_ok else "")).strip()
    print(f"| {ranks} | {stage} | {len(errs)} | {med[0]:+.1%} [{lo[0]:+.1%}, {hi[0]:+.1%}] "
          f"| {med[1] * 1e3:.3f} [{lo[1] * 1e3:.3f}, {hi[1] * 1e3:.3f}] "
          f"| {med[9] * 1e3:.3f} [{lo[9] * 1e3:.3f}, {hi[9] * 1e3:.3f}] "
          f"| {'-' if math.isnan(med[10]) else f'{med[10]:.2f}'} "
          f"| {med[2]:+.1%} | {med[3]:+.1%} "
          f"| {med[4]:+.1%} | {med[5] * 1e3:+.3f} | {med[6] * 1e3:.3f} / {med[7] * 1e3:.3f} "
          f"| {med[8]:+.1%} | {verdict} |")


def bucket_s(sweep_path, op, nbytes, in_place=False):
    """The sweep's times for one bucket's collective at the swept size nearest `nbytes`, in the
    placement the step runs it: back to back (real_time), and issued alone to an idle stream
    and waited for (serial_idle_s), as the step's last reduction meets it."""
    best = None
    for b in json.load(open(sweep_path))["benchmarks"]:
        name = b["name"]
        if not name.startswith(op + "/") or "/group:" in name or b.get("run_type", "iteration") != "iteration":
            continue
        if ("/placement:in" in name) != in_place:
            continue
        size = int(name.split("bytes:")[1].split("/")[0])
        secs = b["real_time"] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        alone = b.get("serial_idle_s", float("nan"))
        if best is None or abs(size - nbytes) < abs(best[0] - nbytes) or (size == best[0] and secs < best[1]):
            best = (size, secs, alone)
    return best[1:] if best else (float("nan"), float("nan"))


def largest_reduction(trace_path, op):
    """The bytes of the largest gradient reduction (`op`) in a zb_zero trace: the bucket as the
    step cut it, whole layers filled to at least --bucket-mb, not the flag's size."""
    with open(trace_path) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    sizes = [e["args"]["bytes"] for e in events
             if e.get("name", "").startswith(op + " ") and "bytes" in e.get("args", {})]
    if not sizes:
        die(f"{trace_path}: no {op} in the trace")
    return max(sizes)


# The issue's configuration for exposure by cause: 16 layers, 2 MiB buckets, 5 ms per layer.
CAUSES_MODEL = ["--params=16e6", "--layers=16", "--bucket-mb=2"]
# How long the stream idles before the step's last reduction: a layer's backward at 5 ms.
CAUSES_IDLE_US = 5000
# The causes table's second sweep spreads each size's calls over this many bytes, twice a
# 32 MiB last-level cache, so that each call reads buffers no recent call left in a cache,
# as a step's collectives do (zb_collectives --footprint).
CAUSES_FOOTPRINT = "64M"


def causes(a, tmp):
    """zb_zero's exposed communication by cause at 2 ranks, schedule-keeping sleep and sleep-for,
    the wire part against one bucket's collective (a sweep at the step's bucket size): back to
    back, as the issue's bar has it, issued alone to an idle stream and waited for, as the
    step's last reduction runs, and alone from buffers spread over CAUSES_FOOTPRINT, as cold in
    the caches as the step's own. z3 cannot hide its first gather either, so it is also held
    against that gather and its last reduction together."""
    print("| compute | stage | overlap_eff | exposed (ms) | skew_wait (ms) | wire_wait (ms) | of it, late finish (ms) "
          "| late rank | one bucket: back to back / alone / alone, spread (ms) "
          "| wire <= 1.2 bucket: back to back / alone / alone, spread |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    per, bucket = {}, {}
    for kind in ("sleep", "sleep-for"):
        per[kind] = {s: [] for s in ("dp", "z1", "z2", "z3")}
        for rep in range(a.reps):
            zero = os.path.join(tmp, f"causes_{kind}_{rep}.json")
            trace = os.path.join(tmp, f"causes_trace_{kind}_{rep}.json")
            run(a, 2, "zb_zero", [*CAUSES_MODEL, f"--compute={kind}:5000", "--overlap=on", "--iters=5",
                                  "--warmup=2", "--no-check", "--stages=dp,z1,z2,z3", f"--trace={trace}",
                                  f"--json={zero}"])
            for stage, b in rows(zero).items():
                per[kind][stage].append(b)
                op = "all_reduce" if stage == "dp" else "reduce_scatter"
                # dp and z1 reduce in place over the whole gradients, z2 and z3 out of it from a slot.
                bucket[stage] = (op, largest_reduction(f"{os.path.splitext(trace)[0]}_{stage}.json", op),
                                 stage in ("dp", "z1"))
                if stage == "z3":  # its units' gathers are as large as their reductions, out of place
                    bucket["z3 gather"] = ("all_gather", bucket[stage][1], False)
    # Two sweeps at each bucket size the steps cut, through the communication thread as they run,
    # in both placements: on one buffer each, and spread.
    swept, spread = {}, {}
    for nbytes in sorted({n for _, n, _ in bucket.values()}):
        for paths, footprint in ((swept, "0"), (spread, CAUSES_FOOTPRINT)):
            paths[nbytes] = os.path.join(tmp, f"causes_sweep_{nbytes}_{footprint}.json")
            run(a, 2, "zb_collectives", ["--progress=thread", "--serial", f"--serial-idle-us={CAUSES_IDLE_US}",
                                         "--placement=out,in", f"--min-bytes={nbytes}", f"--max-bytes={nbytes}",
                                         "--iters=20",
                                         "--warmup=3", f"--footprint={footprint}", f"--json={paths[nbytes]}"])
    for kind, stages in per.items():
        for stage, bs in stages.items():
            med = {k: statistics.median(b[k] for b in bs) for k in ("overlap_eff", "exposed_comm_s", "skew_wait_s",
                                                                     "wire_wait_s", "late_finish_wait_s")}
            late = statistics.mode(int(b["late_rank"]) for b in bs)
            op, nbytes, in_place = bucket[stage]
            one, alone = bucket_s(swept[nbytes], op, nbytes, in_place)
            cold = bucket_s(spread[nbytes], op, nbytes, in_place)[1]
            wire = med["wire_wait_s"]
            ok = "/".join("yes" if wire <= 1.2 * t else "no" for t in (one, alone, cold))
            print(f"| {kind}:5000 | {stage} | {med['overlap_eff']:.2f} | {med['exposed_comm_s'] * 1e3:.3f} "
                  f"| {med['skew_wait_s'] * 1e3:.3f} | {wire * 1e3:.3f} "
                  f"| {med['late_finish_wait_s'] * 1e3:.3f} | {late} "
                  f"| {one * 1e3:.3f} / {alone * 1e3:.3f} / {cold * 1e3:.3f} ({nbytes / 1e6:g} MB) | {ok} |")
            if stage == "z3":
                gop, gbytes, _ = bucket["z3 gather"]
                floors = (alone + bucket_s(swept[gbytes], gop, gbytes)[1],
                          cold + bucket_s(spread[gbytes], gop, gbytes)[1])
                print(f"| {kind}:5000 | z3, against its first gather and last reduction | | | | | | "
                      f"| {floors[0] * 1e3:.3f} alone / {floors[1] * 1e3:.3f} spread "
                      f"| {'/'.join('yes' if wire <= 1.2 * f else 'no' for f in floors)} |")


def main(argv=None):
    p = cli.Parser(description=__doc__)
    p.add_argument("table", choices=list(TABLES), help="one-node: the predictor's errors at each --ranks; causes: "
                   "exposed communication by cause, sleep against sleep-for; links, more-ranks, quantized: on "
                   "tools/cluster.sh")
    p.add_argument("--ranks", default="2,4", help="one-node: rank counts, a list (default 2,4)")
    p.add_argument("--reps", type=int, default=5, help="repetitions whose median is reported (default 5)")
    p.add_argument("--tries", type=int, default=1, help="one-node: measure a repetition again, up to this many "
                   "times in all, until its sweep and every stage's step ran at one host speed (zb_predict's "
                   "host_steady); the last try is kept either way (default 1)")
    p.add_argument("--host-tries", type=int, default=1, help="one-node: the sweep's, the steps' and the kernels' "
                   "--host-tries: each benchmark repetition run again, up to this many times in all, where the host "
                   "changed speed under it (default 1: once)")
    p.add_argument("--sweep-flags", default="", help="one-node: more zb_collectives flags for the sweep, "
                   "space-separated, to try a sweep other than the default run's (default none)")
    p.add_argument("--rates", default="0.5,1,2,4", help="links: link rates measured and predicted, Gbit/s "
                   "(default 0.5,1,2,4)")
    p.add_argument("--sweep-gbps", type=float, default=1, help="links, more-ranks, quantized: the link rate swept at "
                   "(default 1)")
    p.add_argument("--bracket", type=float, default=2, help="links, quantized: how far below and above the "
                   "predicted rate (required_link_gbps; the crossing) to measure, a factor above 1 (default 2)")
    p.add_argument("--out", default="", help="quantized: also write predict_quantized.json over rates around the "
                   "crossing to this folder and draw its quantized_crossing figure")
    p.add_argument("--bind", default="auto", help="one-node, causes: auto (as run_all.sh launches ranks: unbound "
                   "where they fit the cores, each bound to one where they outnumber them), none (never bound) or "
                   "core (each rank bound to a core) (default auto)")
    p.add_argument("--keep", default="", help="one-node: keep the measured files (sweep, zero, rates per rank count "
                   "and repetition) in this folder, to predict from them again with --from")
    p.add_argument("--from", dest="from_dir", default="", help="one-node: measure nothing; predict from the files "
                   "--keep kept in this folder, at --ranks and --reps, so that two builds of zb_predict meet the same "
                   "measurements")
    p.add_argument("--bin", default=os.environ.get("ZB_BIN", os.path.join(ROOT, "build", "bin")),
                   help="the folder of zerobench's binaries (default $ZB_BIN, else build/bin)")
    a = p.parse_args(argv)
    try:
        a.ranks = [int(r) for r in a.ranks.split(",")]
    except ValueError:
        die(f"--ranks={a.ranks}: not a list of rank counts")
    try:
        a.rates = [float(r) for r in a.rates.split(",")]
    except ValueError:
        die(f"--rates={a.rates}: not a list of rates")
    if any(not r > 0 for r in a.rates + [a.sweep_gbps]):
        die("--rates and --sweep-gbps take rates above 0 Gbit/s")
    if a.bind not in ("auto", "none", "core"):
        die(f"--bind={a.bind}: auto, none or core")
    a.sweep_flags = a.sweep_flags.split()
    if any(not f.startswith("--") for f in a.sweep_flags):
        die(f"--sweep-flags={' '.join(a.sweep_flags)}: zb_collectives flags, each starting with --")
    if not a.bracket > 1:
        die(f"--bracket={a.bracket:g}: a factor above 1")
    if any(r < 2 for r in a.ranks) or a.reps < 1:
        die("--ranks takes counts of 2 or more, --reps 1 or more")
    if a.tries < 1:
        die(f"--tries={a.tries}: 1 or more")
    if a.tries > 1 and (a.table != "one-node" or a.from_dir):
        die("--tries measures a one-node repetition again; not with --from or another table")
    if a.host_tries < 1:
        die(f"--host-tries={a.host_tries}: 1 or more")
    if a.host_tries > 1 and (a.table != "one-node" or a.from_dir):
        die("--host-tries is the one-node sweep's, steps' and kernels'; not with --from or another table")
    if (a.keep or a.from_dir) and a.table != "one-node":
        die(f"--keep and --from are one-node's, not {a.table}'s")
    if a.keep and a.from_dir:
        die("--keep and --from: one or the other (--from measures nothing to keep)")
    if a.from_dir and a.sweep_flags:
        die("--sweep-flags and --from: --from measures nothing, so sweeps nothing")
    if a.from_dir and not os.path.isdir(a.from_dir):
        die(f"--from={a.from_dir}: no such folder")
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    if not os.path.isfile(os.path.join(a.bin, "zb_predict")):
        die(f"--bin={a.bin} holds no zb_predict: build first (tools/build.sh)")
    with tempfile.TemporaryDirectory() as tmp:
        TABLES[a.table](a, tmp)
    return 0


TABLES = {"one-node": one_node, "causes": causes, "links": links, "more-ranks": more_ranks, "quantized": quantized}

if __name__ == "__main__":
    sys.exit(main())
