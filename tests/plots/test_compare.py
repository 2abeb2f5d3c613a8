"""plots/compare.py on crafted benchmark files: passes, regressions, exact changes, bad input."""

import json
import os

import pytest

from results_fixture import NAN, aggregate, doc, results_folder, row, run_tool, write

STEP = "zero/stage:z3/params:1048576"


def step_rows(times_ms, **counters):
    """Repetitions of one zero step benchmark with the given real times."""
    base = dict(ranks=4, params=1048576, volume_psi_accounted=3.0, bytes_per_param_measured=4.125,
                bytes_per_param_formula=4.0, wrong=0, step_s=0.01, overlap_eff=0.5,
                wire_bytes_measured=NAN)
    base.update(counters)
    return [row(STEP, t, "ms", rep=i, reps=len(times_ms), **base) for i, t in enumerate(times_ms)]


def compare(tmp_path, base, cur, *flags):
    b, c = tmp_path / "base.json", tmp_path / "cur.json"
    write(b, base)
    write(c, cur)
    return run_tool("compare.py", b, c, *flags)


def verdict(out, metric):
    """The verdict cell of the first table line for a metric."""
    for line in out.splitlines():
        cells = line.split()
        if len(cells) > 1 and cells[1] == metric:
            return line
    raise AssertionError(f"no row for {metric} in:\n{out}")


STEADY = [10.0, 10.1, 9.9, 10.05, 9.95]


def test_identical_runs_pass(tmp_path):
    d = doc(step_rows(STEADY))
    r = compare(tmp_path, d, d)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout
    assert "REGRESSION" not in r.stdout and "MISMATCH" not in r.stdout


def test_thirty_percent_slower_median_fails(tmp_path):
    slow = [t * 1.3 for t in STEADY]
    r = compare(tmp_path, doc(step_rows(STEADY)), doc(step_rows(slow)), "--gate", "all")
    assert r.returncode == 1
    assert "REGRESSION" in verdict(r.stdout, "real_time_s")
    assert "+30.0%" in verdict(r.stdout, "real_time_s")


def test_slower_single_repetition_fails_without_test(tmp_path):
    r = compare(tmp_path, doc(step_rows([10.0])), doc(step_rows([13.0])), "--gate", "all")
    assert r.returncode == 1
    assert "REGRESSION" in verdict(r.stdout, "real_time_s")


def test_slower_within_threshold_passes(tmp_path):
    r = compare(tmp_path, doc(step_rows([10.0])), doc(step_rows([10.5])), "--gate", "all")
    assert r.returncode == 0
    r = compare(tmp_path, doc(step_rows([10.0])), doc(step_rows([10.5])), "--gate", "all",
                "--threshold", "0.01")
    assert r.returncode == 1


def test_slower_median_without_significance_passes(tmp_path):
    # Median 30% up, but the samples overlap too much for Mann-Whitney at 5%.
    r = compare(tmp_path, doc(step_rows([1, 2, 10, 11, 12])), doc(step_rows([1, 2, 13, 14, 15])),
                "--gate", "all")
    assert r.returncode == 0, r.stdout
    assert "not significant" in verdict(r.stdout, "real_time_s")


def test_timed_counter_and_higher_is_better(tmp_path):
    base = doc(step_rows(STEADY, step_s=0.01, overlap_eff=0.8))

    def against(**counters):
        return compare(tmp_path, base, doc(step_rows(STEADY, **counters)), "--gate", "all")

    r = against(step_s=0.02, overlap_eff=0.8)
    assert r.returncode == 1 and "REGRESSION" in verdict(r.stdout, "step_s")
    r = against(step_s=0.01, overlap_eff=0.4)
    assert r.returncode == 1 and "REGRESSION" in verdict(r.stdout, "overlap_eff")
    r = against(step_s=0.005, overlap_eff=0.9)
    assert r.returncode == 0
    assert "improved" in verdict(r.stdout, "step_s")


def test_params_per_s_is_higher_is_better(tmp_path):
    base = doc([row("adam/params:1024", 1.0, params_per_s=1e9, GBps=10.0)])
    slower = doc([row("adam/params:1024", 1.0, params_per_s=5e8, GBps=10.0)])
    faster = doc([row("adam/params:1024", 1.0, params_per_s=2e9, GBps=20.0)])
    assert compare(tmp_path, base, slower, "--gate", "all").returncode == 1
    r = compare(tmp_path, base, faster, "--gate", "all")
    assert r.returncode == 0 and "improved" in verdict(r.stdout, "GBps")


def test_prediction_error_is_tracked_by_its_size(tmp_path):
    # zb_predict's errors have either sign: a prediction that went from 5% low to 5% high is
    # as good as before; one that went from 5% to 30% off regressed.
    def bench(comm_error):
        return doc([row("zero/stage:z1/params:1", 1.0, rep=i, reps=5, comm_error=comm_error) for i in range(5)])
    r = compare(tmp_path, bench(-0.05), bench(0.05), "--gate", "all")
    assert r.returncode == 0 and "ok" in verdict(r.stdout, "comm_error"), r.stdout
    r = compare(tmp_path, bench(0.05), bench(-0.30), "--gate", "all")
    assert r.returncode == 1 and "REGRESSION" in verdict(r.stdout, "comm_error"), r.stdout


def test_the_hosts_speed_in_both_runs_is_stated(tmp_path):
    # The reference collective took 0.15 ms in the baseline's repetitions and 0.60 now: the
    # line says so (the medians over the benchmarks) and the step times are still only reported.
    r = compare(tmp_path, doc(step_rows(STEADY, reference_s=0.00015)),
                doc(step_rows([t * 1.4 for t in STEADY], reference_s=0.0006)))
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("host speed: the reference collective (`reference_s`, median over the benchmarks) took 0.150 ms in "
            "the baseline, 0.600 ms now (4.00x)") in r.stdout.splitlines(), r.stdout
    # A baseline from before the reference collective: no line.
    r = compare(tmp_path, doc(step_rows(STEADY)), doc(step_rows(STEADY, reference_s=0.0006)))
    assert r.returncode == 0 and "host speed" not in r.stdout, r.stdout


def test_changed_exact_metric_fails(tmp_path):
    r = compare(tmp_path, doc(step_rows(STEADY)),
                doc(step_rows(STEADY, bytes_per_param_measured=4.25)))
    assert r.returncode == 1
    assert "MISMATCH" in verdict(r.stdout, "bytes_per_param_measured")
    r = compare(tmp_path, doc(step_rows(STEADY)), doc(step_rows(STEADY, wrong=1)))
    assert r.returncode == 1 and "MISMATCH" in verdict(r.stdout, "wrong")


def test_exact_metric_tolerates_float_rounding_only(tmp_path):
    r = compare(tmp_path, doc(step_rows(STEADY)),
                doc(step_rows(STEADY, volume_psi_accounted=3.0 * (1 + 1e-13))))
    assert r.returncode == 0
    r = compare(tmp_path, doc(step_rows(STEADY)),
                doc(step_rows(STEADY, volume_psi_accounted=3.0 * (1 + 1e-6))))
    assert r.returncode == 1 and "MISMATCH" in verdict(r.stdout, "volume_psi_accounted")


def test_measured_counters_within_default_tolerance_pass(tmp_path):
    # Identical runs: bytes_per_param_measured two 4 KiB pages apart over 2e6 parameters,
    # socket bytes a little over the ring's. The same defaults as run_all.sh, with no flag given.
    page = 2 * 4096 / 2e6
    base = doc(step_rows(STEADY, bytes_per_param_measured=16.007, volume_psi_measured=2.0002))
    same = doc(step_rows(STEADY, bytes_per_param_measured=16.007 + page,
                         volume_psi_measured=2.0004))
    r = compare(tmp_path, base, same)
    assert r.returncode == 0, r.stdout
    assert "tolerance 0.5%" in verdict(r.stdout, "bytes_per_param_measured")
    assert "tolerance 1%" in verdict(r.stdout, "volume_psi_measured")
    # A flag still tightens a default, and a real change still fails.
    r = compare(tmp_path, base, same, "--tolerance", "bytes_per_param_measured=0")
    assert r.returncode == 1 and "MISMATCH" in verdict(r.stdout, "bytes_per_param_measured")
    r = compare(tmp_path, base, doc(step_rows(STEADY, bytes_per_param_measured=16.2,
                                              volume_psi_measured=2.0002)))
    assert r.returncode == 1 and "MISMATCH" in verdict(r.stdout, "bytes_per_param_measured")
    r = compare(tmp_path, base, doc(step_rows(STEADY, bytes_per_param_measured=16.007,
                                              volume_psi_measured=2.1)))
    assert r.returncode == 1 and "MISMATCH" in verdict(r.stdout, "volume_psi_measured")


def test_default_gate_reports_timings_without_failing(tmp_path):
    slow = doc(step_rows([t * 1.3 for t in STEADY]))
    r = compare(tmp_path, doc(step_rows(STEADY)), slow)
    assert r.returncode == 0, r.stdout
    assert "not gated" in verdict(r.stdout, "real_time_s")
    assert "gate=exact" in r.stdout


def test_gate_exact_reports_but_does_not_fail_timings(tmp_path):
    slow = doc(step_rows([t * 1.3 for t in STEADY]))
    r = compare(tmp_path, doc(step_rows(STEADY)), slow, "--gate", "exact")
    assert r.returncode == 0, r.stdout
    assert "not gated" in verdict(r.stdout, "real_time_s")
    changed = doc(step_rows([t * 1.3 for t in STEADY], volume_psi_accounted=2.0))
    assert compare(tmp_path, doc(step_rows(STEADY)), changed, "--gate", "exact").returncode == 1


def test_missing_benchmark_fails_and_new_one_does_not(tmp_path):
    other = "zero/stage:z1/params:1048576"
    base = doc(step_rows(STEADY) + [row(other, 5.0, "ms", ranks=4)])
    r = compare(tmp_path, base, doc(step_rows(STEADY)))
    assert r.returncode == 1
    assert any(other in line and "MISSING" in line for line in r.stdout.splitlines())
    r = compare(tmp_path, doc(step_rows(STEADY)), base)
    assert r.returncode == 0
    assert any(other in line and "new" in line for line in r.stdout.splitlines())


def test_time_units_and_aggregates(tmp_path):
    base = doc([row("copy/params:1", 2000.0, "ns")])
    cur = doc([row("copy/params:1", 2.0, "us"), aggregate("copy/params:1", "mean", 1e9, "ns")])
    r = compare(tmp_path, base, cur)
    assert r.returncode == 0, r.stdout
    assert "+0.0%" in verdict(r.stdout, "real_time_s")


def test_nan_counters_do_not_fail(tmp_path):
    base = doc(step_rows([10.0], comm_s=NAN, volume_psi_accounted=NAN))
    r = compare(tmp_path, base, base)
    assert r.returncode == 0, r.stdout
    assert "n/a" in verdict(r.stdout, "comm_s")


@pytest.mark.parametrize("content", ["", "{not json", json.dumps({"rows": []}),
                                     json.dumps({"benchmarks": [{"no_name": 1}]})])
def test_unreadable_input_exits_2(tmp_path, content):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    good = tmp_path / "good.json"
    write(good, doc(step_rows(STEADY)))
    for a, b in ((good, bad), (bad, good)):
        r = run_tool("compare.py", a, b)
        assert r.returncode == 2
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_missing_file_and_file_against_folder_exit_2(tmp_path):
    good = tmp_path / "good.json"
    write(good, doc(step_rows(STEADY)))
    assert run_tool("compare.py", good, tmp_path / "nope.json").returncode == 2
    assert run_tool("compare.py", good, tmp_path).returncode == 2


def test_results_folders(tmp_path):
    base, cur = tmp_path / "base", tmp_path / "cur"
    results_folder(base)
    docs = results_folder(cur)
    r = run_tool("compare.py", base, cur, "--markdown", tmp_path / "report.md")
    assert r.returncode == 0, r.stdout + r.stderr
    for name in ("collectives.json", "zero.json", "zero_sweep.json", "optimizer.json"):
        assert name in r.stdout
    # plan.json and trace.json are not Google Benchmark files: skipped, not errors.
    assert "plan.json" in r.stderr and "trace.json" in r.stderr
    md = (tmp_path / "report.md").read_text()
    assert "| benchmark | metric | baseline | current | change | verdict |" in md

    os.remove(cur / "optimizer.json")
    r = run_tool("compare.py", base, cur)
    assert r.returncode == 1
    assert "optimizer.json not in current" in r.stdout

    write(cur / "optimizer.json", docs["optimizer.json"])
    (cur / "zero.json").write_text("{truncated")
    assert run_tool("compare.py", base, cur).returncode == 2


def test_a_time_and_its_rate_worsen_alike(tmp_path):
    """A step 10.5% longer and a bandwidth at 1/1.105 of the baseline's (9.5% lower) are the
    same slowdown: both past the 10% threshold, judged on the log of the ratio."""
    base = doc(step_rows(STEADY, step_s=0.01, busbw_GBps=10.0))
    r = compare(tmp_path, base, doc(step_rows(STEADY, step_s=0.01105, busbw_GBps=10.0 / 1.105)), "--gate", "all")
    assert r.returncode == 1, r.stdout
    assert "REGRESSION" in verdict(r.stdout, "step_s") and "REGRESSION" in verdict(r.stdout, "busbw_GBps")
    # A step at 1/1.105 (9.5% shorter) is the gain of a rate 10.5% higher: both improved; at
    # 1/1.095 and 9.5% higher, both within the threshold.
    for gain, word in ((1.105, "improved"), (1.095, "ok")):
        r = compare(tmp_path, base, doc(step_rows(STEADY, step_s=0.01 / gain, busbw_GBps=10.0 * gain)),
                    "--gate", "all")
        assert word in verdict(r.stdout, "step_s") and word in verdict(r.stdout, "busbw_GBps"), r.stdout


def test_a_timing_with_no_value_now_is_lost(tmp_path):
    """A gated timing the baseline measured and the current run wrote as NaN is lost, as one the
    current run dropped is; measured on neither side it is n/a."""
    base = doc(step_rows(STEADY, step_s=0.01))
    r = compare(tmp_path, base, doc(step_rows(STEADY, step_s=NAN)), "--gate", "all")
    assert r.returncode == 1 and "MISSING" in verdict(r.stdout, "step_s"), r.stdout
    r = compare(tmp_path, base, doc(step_rows(STEADY, step_s=NAN)))
    assert r.returncode == 0 and "missing" in verdict(r.stdout, "step_s"), r.stdout


def test_wrong_elements_fail_with_no_baseline_for_them(tmp_path):
    base = doc([row(STEP, 10.0, "ms", ranks=4)])
    r = compare(tmp_path, base, doc([row(STEP, 10.0, "ms", ranks=4, wrong=3)]))
    assert r.returncode == 1 and "MISMATCH" in verdict(r.stdout, "wrong"), r.stdout
    r = compare(tmp_path, base, doc([row(STEP, 10.0, "ms", ranks=4, wrong=0)]))
    assert r.returncode == 0 and "new" in verdict(r.stdout, "wrong"), r.stdout
