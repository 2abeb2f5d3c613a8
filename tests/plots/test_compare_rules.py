"""plots/compare_rules.py: which way each counter is better, new counter names included, and
results written with the names before the suffix rule against results written after."""

import sys

import pytest

from results_fixture import NAN, PLOTS, doc, row, run_tool, write

sys.path.insert(0, PLOTS)
import compare_rules  # noqa: E402


@pytest.mark.parametrize("metric,expected", [
    ("real_time", "lower"), ("step_s", "lower"), ("exposed_comm_diff_s", "lower"),
    ("compute_per_layer_s", "lower"), ("overhead_ratio", "lower"),
    ("p50", "lower"), ("p99_s", "lower"), ("lat_p99_us", "lower"), ("p99.9_s", "lower"),
    ("busbw_GBps", "higher"), ("GBps", "higher"), ("params_per_s", "higher"),
    ("tokens_per_s", "higher"), ("frac_of_limit", "higher"), ("overlap_eff", "higher"),
    ("busbw_p50_GBps", "higher"),
    ("wrong", "exact"), ("volume_psi_accounted", "exact"), ("bytes_per_param_measured", "exact"),
    ("bytes_per_param_accounted", "exact"), ("volume_psi_measured", "exact"),
    ("wire_bytes_formula", "exact"), ("wire_bytes_accounted", "exact"),
    ("inter_node_bytes_accounted", "exact"), ("intra_node_bytes_formula", "exact"),
    ("comm_s_predicted", None), ("step_s_predicted", None), ("volume_psi", None), ("wire_bytes_ideal", None),
    ("wire_bytes_measured", "exact"), ("bytes", "exact"), ("host_bytes_per_param_accounted", "exact"),
    ("device_bytes_per_param_measured", "exact"), ("weight_error_max", "exact"), ("hidden_frac", "higher"),
    ("top50", None), ("group_id", None),
])
def test_kind_by_name(metric, expected):
    assert compare_rules.kind(metric) == expected


def test_tolerances_merge_over_defaults():
    merged = compare_rules.merged_tolerances({"bytes_per_param_measured": 0.0, "step_s": 0.2})
    assert merged["bytes_per_param_measured"] == 0.0
    assert merged["volume_psi_measured"] == compare_rules.DEFAULT_TOLERANCES["volume_psi_measured"]
    assert compare_rules.kind("step_s", merged) == "exact"
    # An explicit empty set of tolerances leaves measured counters uncompared.
    assert compare_rules.kind("volume_psi_measured", {}) is None


def test_defaults_are_the_documented_ones():
    assert compare_rules.DEFAULT_GATE == "exact"
    assert compare_rules.DEFAULT_THRESHOLD == 0.1
    assert compare_rules.DEFAULT_TOLERANCES["bytes_per_param_measured"] == 0.005
    assert compare_rules.DEFAULT_TOLERANCES["volume_psi_measured"] == 0.01
    assert "bytes_per_param_measured=0.005" in compare_rules.TOLERANCE_HELP


@pytest.mark.parametrize("program,old,new", [
    ("zb_zero", "volume_psi", "volume_psi_accounted"),
    ("zb_zero", "wire_bytes_ideal", "wire_bytes_accounted"),
    ("zb_zero", "intra_node_bytes", "intra_node_bytes_measured"),
    ("zb_pipeline", "grad_bytes_per_param", "grad_bytes_per_param_measured"),
    ("zb_collectives", "wire_bytes_ideal", "wire_bytes_formula"),
    ("zb_offload", "host_bytes_per_param_tracked", "host_bytes_per_param_accounted"),
    ("zb_predict", "comm_s", "comm_s_predicted"),
    ("zb_predict", "comm_s_measured", "comm_s_measured"),
    # zb_zero's own comm_s, a measurement with no other side there, keeps its name.
    ("zb_zero", "comm_s", "comm_s"), ("zb_optimizer", "step_s", "step_s"),
])
def test_old_names_map_to_new_by_program(program, old, new):
    assert compare_rules.new_name(old, program) == new


def test_the_program_is_the_command_lines_else_the_benchmarks():
    cmd = {"command_line": "/x/build/bin/zb_predict --sweep=s.json"}
    assert compare_rules.program_of(cmd, "zero/stage:z1/params:8") == "zb_predict"
    assert compare_rules.program_of({}, "zero/stage:z1/params:8") == "zb_zero"
    assert compare_rules.program_of({}, "all_gather/bytes:4096/dtype:bf16") == "zb_collectives"
    assert compare_rules.program_of({}, "mystery/x:1") == ""


def test_an_old_tolerance_name_reaches_the_new_names():
    t = compare_rules.parse_tolerances(["bytes_per_param=0", "wire_bytes_ideal=0.5"])
    assert t["bytes_per_param_measured"] == 0
    assert t["wire_bytes_formula"] == t["wire_bytes_accounted"] == 0.5


STEP = "zero/stage:z3/params:1048576"
OLD = dict(ranks=4, volume_psi=3.0, volume_psi_intra=3.0, bytes_per_param=4.125,
           bytes_per_param_tracked=4.0, bytes_per_param_formula=4.0, wire_bytes_ideal=6e6,
           inter_node_bytes_ideal=0.0, intra_node_bytes=NAN, step_s=0.01, wrong=0)


def test_results_with_old_names_compare_against_new_ones(tmp_path):
    new = {compare_rules.new_name(k, "zb_zero"): v for k, v in OLD.items()}
    assert "volume_psi_accounted" in new and "volume_psi" not in new
    base, cur = tmp_path / "base.json", tmp_path / "cur.json"
    write(base, doc([row(STEP, 10.0, "ms", **OLD)]))
    write(cur, doc([row(STEP, 10.0, "ms", **new)]))
    r = run_tool("compare.py", base, cur)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "MISSING" not in r.stdout and " new" not in r.stdout
    assert "volume_psi_accounted" in r.stdout and "volume_psi " not in r.stdout
    # A change the rename must not hide: the old file's volume against a different new one.
    write(cur, doc([row(STEP, 10.0, "ms", **dict(new, volume_psi_accounted=2.0))]))
    r = run_tool("compare.py", base, cur)
    assert r.returncode == 1 and "MISMATCH" in r.stdout, r.stdout


def test_every_counter_of_the_baseline_is_judged_or_says_why_not():
    """A counter the comparator gives no kind is never compared, so a regression in it passes
    the gate unseen: every counter the committed baseline holds has a kind, or an entry in
    NOT_COMPARED that says why it has none."""
    import glob
    import json
    import os
    base = os.path.join(os.path.dirname(PLOTS), "results", "baselines", "quick_cpu_2ranks")
    layout = {"name", "run_name", "run_type", "family_index", "per_family_instance_index", "repetitions",
              "repetition_index", "threads", "iterations", "cpu_time", "time_unit", "aggregate_name",
              "aggregate_unit", "label", "error_occurred", "error_message"}
    unjudged = set()
    for path in glob.glob(os.path.join(base, "*.json")):
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
        for b in document.get("benchmarks", []) if isinstance(document, dict) else []:
            unjudged |= {k for k in b if k not in layout and compare_rules.kind(k) is None}
    assert unjudged, "the baseline holds no counter without a kind: the test reads nothing"
    assert {k for k in unjudged if compare_rules.why_not_compared(k) is None} == set()


def test_a_tolerance_for_a_measurement_is_not_its_predictions():
    """zb_predict once wrote its prediction as comm_s, zb_zero's measurement today: a tolerance
    given for comm_s is the measurement's, and the prediction stays unjudged."""
    t = compare_rules.parse_tolerances(["comm_s=0.05"])
    assert t["comm_s"] == 0.05 and "comm_s_predicted" not in t
    assert compare_rules.kind("comm_s_predicted", t) is None
