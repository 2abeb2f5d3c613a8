"""plots/compare_rules.py: which way each counter is better, new counter names included."""

import sys

import pytest

from results_fixture import PLOTS

sys.path.insert(0, PLOTS)
import compare_rules  # noqa: E402


@pytest.mark.parametrize("metric,expected", [
    ("real_time", "lower"), ("step_s", "lower"), ("exposed_comm_diff_s", "lower"),
    ("compute_per_layer_s", "lower"), ("overhead_ratio", "lower"),
    ("p50", "lower"), ("p99_s", "lower"), ("lat_p99_us", "lower"), ("p99.9_s", "lower"),
    ("busbw_GBps", "higher"), ("GBps", "higher"), ("params_per_s", "higher"),
    ("tokens_per_s", "higher"), ("frac_of_limit", "higher"), ("overlap_eff", "higher"),
    ("busbw_p50_GBps", "higher"),
    ("wrong", "exact"), ("volume_psi", "exact"), ("bytes_per_param", "exact"),
    ("volume_psi_measured", "exact"), ("wire_bytes_ideal", "exact"),
    ("wire_bytes_measured", None), ("bytes", None), ("top50", None), ("group_id", None),
])
def test_kind_by_name(metric, expected):
    assert compare_rules.kind(metric) == expected


def test_tolerances_merge_over_defaults():
    merged = compare_rules.merged_tolerances({"bytes_per_param": 0.0, "step_s": 0.2})
    assert merged["bytes_per_param"] == 0.0
    assert merged["volume_psi_measured"] == compare_rules.DEFAULT_TOLERANCES["volume_psi_measured"]
    assert compare_rules.kind("step_s", merged) == "exact"
    # An explicit empty set of tolerances leaves measured counters uncompared.
    assert compare_rules.kind("volume_psi_measured", {}) is None


def test_defaults_are_the_documented_ones():
    assert compare_rules.DEFAULT_GATE == "exact"
    assert compare_rules.DEFAULT_THRESHOLD == 0.1
    assert compare_rules.DEFAULT_TOLERANCES == {"bytes_per_param": 0.005,
                                                "volume_psi_measured": 0.01}
    assert "bytes_per_param=0.005" in compare_rules.TOLERANCE_HELP
