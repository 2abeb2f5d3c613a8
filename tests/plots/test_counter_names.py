"""plots/counter_names.py: the counter suffix rule on crafted names, good and bad."""

import sys

import pytest

from results_fixture import PLOTS

sys.path.insert(0, PLOTS)
import counter_names  # noqa: E402

GOOD = [
    # zb_zero's volume from three sides, its parts from one, one-sided timings bare.
    ["volume_psi_accounted", "volume_psi_measured", "volume_psi_intra_accounted", "step_s",
     "comm_s", "exposed_comm_s", "overlap_eff", "wrong", "bytes_per_param_formula",
     "bytes_per_param_accounted", "bytes_per_param_measured", "transient_peak_bytes"],
    # zb_predict's predictions beside the measurements it copied.
    ["comm_s_predicted", "comm_s_measured", "exposed_comm_s_predicted", "exposed_error_s",
     "extrapolated"],
    # zb_collectives: a formula and a measurement of one quantity.
    ["wire_bytes_formula", "wire_bytes_measured", "busbw_GBps", "bytes", "p99_s"],
    [],
]

BAD = [
    (["volume_psi", "volume_psi_formula"], "volume_psi: stands bare beside volume_psi_formula"),
    (["bytes_per_param", "bytes_per_param_formula", "bytes_per_param_accounted"],
     "bytes_per_param: stands bare beside bytes_per_param_accounted, bytes_per_param_formula"),
    (["comm_s", "comm_s_measured"], "comm_s: stands bare"),
    (["wire_bytes_ideal"], "wire_bytes_ideal: '_ideal' is retired"),
    (["bytes_per_param_tracked"], "'_tracked' is retired"),
    (["wire_measured_bytes"], "wire_measured_bytes: the side 'measured' must end the name"),
    (["volume_measured_psi_formula"], "the side 'measured' must end the name"),
]


@pytest.mark.parametrize("names", GOOD)
def test_good_names_pass(names):
    assert counter_names.violations(names) == []


@pytest.mark.parametrize("names,why", BAD)
def test_bad_names_are_named_with_the_reason(names, why):
    found = counter_names.violations(names)
    assert len(found) == 1 and why in found[0], found
