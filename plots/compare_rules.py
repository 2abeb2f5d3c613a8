"""Decides, metric by metric, whether a benchmark regressed between baseline and current."""

import math
import re
import statistics
from dataclasses import dataclass

# The defaults that run_all.sh, compare.py and ab.py share, so that every way of comparing
# judges the same counter the same way. The gate is "exact": on a shared machine a timing
# compared across two separate runs moves with the machine, not the code; timings are gated
# by A/B runs (tools/ab.sh, plots/ab/ab.py), whose paired ratios cancel that drift. For A/B runs
# the threshold is the regression the gate must catch (plots/ab/ab_gate.py).
DEFAULT_THRESHOLD = 0.1
DEFAULT_GATE = "exact"


@dataclass(frozen=True)
class Gated:
    """A timed metric the A/B gate fails on: in results file `file`, the benchmarks whose name
    `benchmark` (a regular expression) finds, their counter `metric`; `why` says why."""
    file: str
    benchmark: str
    metric: str
    why: str


# The A/B gate's timed metrics: what a regression means to a user. Every other timed metric
# is reported and never fails a run. (Exact metrics, and benchmarks B lost, always fail.)
GATED = (
    Gated("collectives.json", r"^(all_reduce|reduce_scatter|all_gather)/bytes:(65536|1048576)/",
          "busbw_GBps", "each collective's bus bandwidth, at 64 KiB where its latency counts and "
          "at 1 MiB where its bandwidth does: the rate every bucket and layer of a step moves at"),
    Gated("zero.json", r"^zero/", "step_s",
          "each stage's training step with compute and overlap: the time a user waits for"),
    Gated("zero.json", r"^zero/", "comm_s",
          "each stage's communication alone: a regression that this compute still hides, and "
          "a faster device would not"),
    Gated("optimizer.json", r"^(adam|momentum)/params:1048576/", "GBps",
          "the optimizer kernels' memory bandwidth at a million parameters: the update's share "
          "of every step"),
)


def gated_rule(file, benchmark, metric):
    """The entry of GATED that gates this metric, or None."""
    return next((g for g in GATED if g.file == file and g.metric == metric
                 and re.search(g.benchmark, benchmark)), None)


# The chance that A/B runs of unchanged code fail the gate: the family-wise error of the
# whole run, over every gated metric together.
GATE_ERROR = 0.05

# Counters that follow from the configuration alone: any change is a bug.
EXACT = {"wrong", "volume_psi_accounted", "bytes_per_param_measured", "bytes_per_param_formula",
         "bytes_per_param_accounted", "bytes_per_param_moved", "params", "ranks", "padding",
         "state_params", "transient_peak_bytes", "wire_bytes_formula", "wire_bytes_accounted",
         "nodes", "ranks_per_node", "volume_psi_intra_accounted", "volume_psi_inter_accounted",
         "inter_node_bytes_accounted", "intra_node_bytes_accounted", "inter_node_bytes_formula",
         "intra_node_bytes_formula",
         # zb_pipeline's formulas and counts
         "volume_psi_formula", "grad_bytes_per_param_formula", "collectives", "microbatches",
         "chunks",
         # zb_offload's books, formulas and shape
         "host_bytes_per_param_accounted", "device_bytes_per_param_formula", "chunk_bytes", "slots",
         "layers",
         # zb_collectives' shape: the size, and the buffers a spread call cycles through
         "bytes", "footprint_bytes",
         # a quantized gather's error bound follows from its format and the values' range
         "weight_error_bound"}
EXACT_REL_TOL = 1e-9

# Measured counters compared as exact within a relative tolerance. bytes_per_param_measured is
# resident-set growth (cudaMemGetInfo on GPUs), counted in pages: identical runs differ by a
# page or two, 0.08% at most on the quick model; the pipeline's gradients and the offload's
# host and device bytes are measured the same way, the device's a small state (half a byte a
# parameter on the quick model, where a page is 0.8% of it: two pages apart between runs).
# volume_psi_measured and wire_bytes_measured are the bytes the ranks wrote to their sockets,
# which include a few bytes of the transport's own; a node's link or loopback counter
# (inter/intra_node_bytes_measured) adds the TCP/IP headers, up to 2% of the payload (the
# summary's bound above the rings' books, plots/tolerances.py, is this one). A quantized
# gather's error against the original weights is a deterministic function of the same values,
# up to the order of a threaded sum.
DEFAULT_TOLERANCES = {"bytes_per_param_measured": 0.005, "grad_bytes_per_param_measured": 0.005,
                      "host_bytes_per_param_measured": 0.005, "device_bytes_per_param_measured": 0.05,
                      "volume_psi_measured": 0.01, "wire_bytes_measured": 0.01,
                      "inter_node_bytes_measured": 0.02, "intra_node_bytes_measured": 0.02,
                      "weight_error_max": 0.01, "weight_error_rms": 0.01}

# Counters a results file holds that no comparison judges, each with why: a run's own
# conditions (its host's speed, its noise), or a copy of a counter judged in another file.
NOT_COMPARED = {
    "bare_repeat_ratio": "the bare call against itself: the host's noise, not the code's",
    "page_faults": "the kernel's paging during a benchmark: the host's",
    "primed_calls": "calls run before timing, to prime the slots: a setting, not a result",
    "rank_spread": "how far the ranks' cores differed in speed: the host's",
    "late_rank": "which rank was last: a rank number, with no better or worse",
    "host_steady": "whether the host held one speed: the run's conditions",
    "reference_ratio": "the host's speed in the step against the sweep's: the run's conditions",
    "extrapolated": "a flag of the sweep's coverage: the prediction's errors judge it",
    "modelled": "a flag of the sweep's coverage: the prediction's errors judge it",
    "link_gbps": "the link rate a prediction was asked for: its name says it",
    "required_link_gbps": "a prediction from timings: its errors judge the model",
    "beats_unquantized_below_gbps": "a prediction from timings: its errors judge the model",
    "comm_s_measured": "zb_zero's comm_s, copied beside its prediction: judged in zero.json",
    "exposed_comm_s_measured": "zb_zero's exposed_comm_s, copied: judged in zero.json",
    "skew_wait_s_measured": "zb_zero's skew_wait_s, copied: judged in zero.json",
}


def why_not_compared(metric):
    """Why a counter is not compared, or None where no reason is recorded."""
    if metric.endswith("_predicted"):
        return "a prediction: its errors against what was measured are judged (kind)"
    return NOT_COMPARED.get(metric)

# The counters the suffix rule renamed (docs/design.md), old name -> new name, by the program
# that writes them: results written before the rename compare against results written after.
# Kept for one release, then removed with the old names.
RENAMED = {
    "zb_zero": {
        "volume_psi": "volume_psi_accounted",
        "volume_psi_intra": "volume_psi_intra_accounted",
        "volume_psi_inter": "volume_psi_inter_accounted",
        "inter_node_bytes_ideal": "inter_node_bytes_accounted",
        "intra_node_bytes_ideal": "intra_node_bytes_accounted",
        "intra_node_bytes": "intra_node_bytes_measured",
        "bytes_per_param": "bytes_per_param_measured",
        "bytes_per_param_tracked": "bytes_per_param_accounted",
        "wire_bytes_ideal": "wire_bytes_accounted",
    },
    "zb_pipeline": {
        "volume_psi": "volume_psi_accounted",
        "bytes_per_param": "bytes_per_param_measured",
        "bytes_per_param_tracked": "bytes_per_param_accounted",
        "grad_bytes_per_param": "grad_bytes_per_param_measured",
        "wire_bytes_ideal": "wire_bytes_accounted",
    },
    "zb_predict": {
        "volume_psi": "volume_psi_accounted",
        "comm_s": "comm_s_predicted",
        "exposed_comm_s": "exposed_comm_s_predicted",
        "step_s": "step_s_predicted",
        "compute_s": "compute_s_predicted",
    },
    "zb_collectives": {
        "wire_bytes_ideal": "wire_bytes_formula",
        "inter_node_bytes_ideal": "inter_node_bytes_formula",
        "intra_node_bytes_ideal": "intra_node_bytes_formula",
        "intra_node_bytes": "intra_node_bytes_measured",
    },
    "zb_offload": {
        "host_bytes_per_param": "host_bytes_per_param_measured",
        "host_bytes_per_param_tracked": "host_bytes_per_param_accounted",
        "device_bytes_per_param": "device_bytes_per_param_measured",
    },
}
# A file without a command line: its program by its benchmarks' names (zb_predict's carry the
# names of the benchmarks they predict, so only its command line tells it apart).
_PROGRAM_BY_FAMILY = {"zero": "zb_zero", "zero_sweep": "zb_zero", "pipeline": "zb_pipeline",
                      "offload_grads": "zb_offload", "offload_weights": "zb_offload",
                      "all_reduce": "zb_collectives", "reduce_scatter": "zb_collectives",
                      "all_gather": "zb_collectives", "hier_all_reduce": "zb_collectives"}


def program_of(context, benchmark=""):
    """The program that wrote a results file: from its context's command line, else from a
    benchmark's name; "" when neither says."""
    words = str((context or {}).get("command_line", "")).split()
    if words:
        return words[0].rsplit("/", 1)[-1]
    return _PROGRAM_BY_FAMILY.get(benchmark.split("/", 1)[0], "")


def new_name(metric, program):
    """A counter's name as the program writes it now."""
    return RENAMED.get(program, {}).get(metric, metric)


def with_new_names(context, runs):
    """The runs of one results file (gbjson.Run), their counters under today's names."""
    for r in runs:
        program = program_of(context, r.run_name)
        r.counters = {new_name(k, program): v for k, v in r.counters.items()}
    return runs

TOLERANCE_HELP = ("METRIC=REL: compare METRIC as an exact (always gated) metric that may differ "
                  "by a relative REL; also makes a measured counter such as volume_psi_measured "
                  f"exact within REL; REL 0 holds it to {EXACT_REL_TOL:g}, as the exact counters are. "
                  "Defaults: "
                  + ", ".join(f"{m}={r:g}" for m, r in sorted(DEFAULT_TOLERANCES.items()))
                  + ". Repeatable.")

# How a timed counter's name says which way is better. Checked in this order: bandwidths and
# rates first, because params_per_s also ends in "_s".
HIGHER_NAMES = {"GBps", "frac_of_limit", "overlap_eff", "hidden_frac"}
HIGHER_SUFFIXES = ("_GBps", "_per_s", "_frac_of_limit", "_overlap_eff")
LOWER_NAMES = {"real_time", "overhead_ratio"}
# Percentiles of a time (p50, p99, p50_s, lat_p99_us, ...) are timings whatever their unit.
PERCENTILE = re.compile(r"(^|_)p\d{1,2}(\.\d+)?(_|$)")
# A prediction's error against what was measured (zb_predict: comm_error, exposed_error,
# exposed_error_s) may have either sign; it is tracked by its size, smaller better.
ERROR_SUFFIXES = ("_error", "_error_s")

# The significance test needs this many repetitions on both sides to mean anything.
MIN_REPS_FOR_TEST = 5
ALPHA = 0.05

# Verdicts that make the comparator exit 1.
FAILING = {"REGRESSION", "MISMATCH", "MISSING", "ERROR"}


def merged_tolerances(overrides=None):
    """The default tolerances with the given {metric: relative tolerance} on top."""
    merged = dict(DEFAULT_TOLERANCES)
    merged.update(overrides or {})
    return merged


def parse_tolerances(items):
    """{metric: REL} from METRIC=REL strings, over the defaults; ValueError names a bad one. An
    old counter name stands for every name it became (RENAMED)."""
    overrides = {}
    for item in items:
        metric, _, rel = item.partition("=")
        try:
            value = float(rel)
        except ValueError:
            value = math.nan
        if not metric or not value >= 0:
            raise ValueError(f"--tolerance {item!r}: expected METRIC=REL with REL >= 0")
        # zb_predict's old names are zb_zero's current ones (comm_s, step_s): a tolerance given
        # for the measurement is not the prediction's.
        for name in {renamed.get(metric, metric) for program, renamed in RENAMED.items() if program != "zb_predict"}:
            overrides[name] = value
    return merged_tolerances(overrides)


def kind(metric, tolerances=None):
    """"exact", "lower" (time: lower is better), "higher", "error" (its size: lower is
    better), or None (not compared).

    tolerances: the metrics compared as exact within a tolerance (default DEFAULT_TOLERANCES).
    """
    if metric in EXACT or metric in (DEFAULT_TOLERANCES if tolerances is None else tolerances):
        return "exact"
    if metric.endswith("_predicted"):
        # A prediction moving is neither better nor worse: its errors against what was
        # measured (comm_error, exposed_error) are what is judged.
        return None
    if metric.endswith(ERROR_SUFFIXES):
        return "error"
    if metric in HIGHER_NAMES or metric.endswith(HIGHER_SUFFIXES):
        return "higher"
    if metric in LOWER_NAMES or metric.endswith("_s") or PERCENTILE.search(metric):
        return "lower"
    return None


@dataclass
class Row:
    """One line of the report."""
    benchmark: str
    metric: str
    baseline: float
    current: float
    change: float  # relative, (current - baseline) / baseline; NaN when undefined
    verdict: str
    note: str = ""

    @property
    def fails(self):
        return self.verdict in FAILING


def _clean(values):
    return [v for v in values if not math.isnan(v)]


def _median(values):
    vals = _clean(values)
    return statistics.median(vals) if vals else math.nan


def _same(a, b, rel_tol=EXACT_REL_TOL):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=max(rel_tol, EXACT_REL_TOL), abs_tol=0.0)


def _relative(base, cur):
    if math.isnan(base) or math.isnan(cur):
        return math.nan
    if base == 0:
        return 0.0 if cur == 0 else math.copysign(math.inf, cur)
    return (cur - base) / abs(base)


def compare_exact(bench, metric, base_vals, cur_vals, rel_tol=0.0):
    """Every current repetition must equal the baseline's value (within rel_tol if given)."""
    base = base_vals[0]
    cur = next((v for v in cur_vals if not _same(base, v, rel_tol)), cur_vals[0])
    ok = all(_same(base, v, rel_tol) for v in cur_vals + base_vals)
    note = f"tolerance {rel_tol * 100:g}%" if rel_tol > 0 else ""
    return Row(bench, metric, base, cur, _relative(base, cur), "ok" if ok else "MISMATCH", note)


def _significant(base_vals, cur_vals, worse_is_greater):
    """One-sided Mann-Whitney U: is current stochastically worse than baseline?"""
    from scipy.stats import mannwhitneyu
    alternative = "greater" if worse_is_greater else "less"
    try:
        p = mannwhitneyu(cur_vals, base_vals, alternative=alternative).pvalue
    except ValueError:
        return False, math.nan
    if math.isnan(p):
        return False, p
    return p < ALPHA, p


def compare_timed(bench, metric, base_vals, cur_vals, threshold, gated):
    """Median against median with a relative threshold, plus significance when samples allow."""
    lower_better = kind(metric) != "higher"
    b, c = _clean(base_vals), _clean(cur_vals)
    base, cur = _median(b), _median(c)
    change = _relative(base, cur)
    if b and not c:  # a value in the baseline, none now: lost, as a metric gone is
        return Row(bench, metric, base, cur, change, "MISSING" if gated else "missing", "no finite value now")
    if not b or not c:
        return Row(bench, metric, base, cur, change, "n/a", "no finite samples")
    # On the log of the ratio, so that a time 10.5% longer and the rate 1/1.105 of it (9.5%
    # lower) are the same worsening; the relative change where a side is not above zero.
    step = math.log(cur / base) if base > 0 and cur > 0 else change
    worse = step if lower_better else -step
    bar = math.log1p(threshold) if base > 0 and cur > 0 else threshold
    if worse <= bar:
        verdict = "improved" if -worse > bar else "ok"
        return Row(bench, metric, base, cur, change, verdict)
    note = ""
    if len(b) >= MIN_REPS_FOR_TEST and len(c) >= MIN_REPS_FOR_TEST:
        sig, p = _significant(b, c, worse_is_greater=lower_better)
        note = f"p={p:.3g}"
        if not sig:
            return Row(bench, metric, base, cur, change, "not significant", note)
    else:
        note = f"n={len(b)}/{len(c)}, no test"
    if not gated:
        return Row(bench, metric, base, cur, change, "worse (not gated)", note)
    return Row(bench, metric, base, cur, change, "REGRESSION", note)


def metric_names(runs):
    """real_time, then every counter of these runs in the order first seen: what a comparison
    of one benchmark walks, on either side."""
    names = ["real_time"]
    for r in runs:
        names += [m for m in r.counters if m not in names]
    return names


def compare_benchmark(bench, base_runs, cur_runs, threshold, gate, tolerances=None):
    """All report rows for one benchmark present on both sides.

    tolerances: {metric: relative tolerance} for metrics compared as exact within it
    (default DEFAULT_TOLERANCES).
    """
    tolerances = DEFAULT_TOLERANCES if tolerances is None else tolerances
    metrics = metric_names(base_runs + cur_runs)
    rows = []
    for metric in metrics:
        k = kind(metric, tolerances)
        if k is None:
            continue
        in_base = metric == "real_time" or any(metric in r.counters for r in base_runs)
        in_cur = metric == "real_time" or any(metric in r.counters for r in cur_runs)
        gated = k == "exact" or gate == "all"
        if not in_cur:
            rows.append(Row(bench, metric, _median([r.value(metric) for r in base_runs]),
                            math.nan, math.nan, "MISSING" if gated else "missing",
                            "metric gone from current"))
            continue
        if not in_base:
            cur = _median([r.value(metric) for r in cur_runs])
            # Elements that differ from the reference are a bug whatever the baseline recorded.
            bad = metric == "wrong" and any(v != 0 for v in _clean([r.value(metric) for r in cur_runs]))
            rows.append(Row(bench, metric, math.nan, cur, math.nan, "MISMATCH" if bad else "new",
                            "wrong elements, with no baseline to hold them against" if bad else ""))
            continue
        base_vals = [r.value(metric) for r in base_runs]
        cur_vals = [r.value(metric) for r in cur_runs]
        if k == "error":
            base_vals, cur_vals = [abs(v) for v in base_vals], [abs(v) for v in cur_vals]
        if k == "exact":
            rows.append(compare_exact(bench, metric, base_vals, cur_vals,
                                      tolerances.get(metric, 0.0)))
        else:
            rows.append(compare_timed(bench, metric, base_vals, cur_vals, threshold, gated))
    return rows
