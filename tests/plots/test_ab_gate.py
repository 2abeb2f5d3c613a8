"""plots/ab/ab_gate.py on crafted and simulated log ratios: the test, Holm's correction, the floor,
what the pairs could detect; and on 10,000 simulated A/A runs of the real number of gated
timings, the whole run's false-alarm rate at its target. Seeded: the same draws every time."""

import json
import math
import os
import re
import shutil
import sys
import zlib

import numpy as np
import pytest
from scipy import stats

from results_fixture import PLOTS, ROOT, run_tool

sys.path.insert(0, PLOTS)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import ab_gate  # noqa: E402
import gbjson  # noqa: E402
from ab_rows import _gb_files  # noqa: E402
from compare_rules import DEFAULT_THRESHOLD, GATE_ERROR, GATED, gated_rule, kind  # noqa: E402

T, E = DEFAULT_THRESHOLD, GATE_ERROR
BASELINE = os.path.join(ROOT, "results", "baselines", "quick_cpu_2ranks")
RUNS = 10_000


def gated_in_baseline():
    """The gated timings of the committed quick run: the metrics the CI form gates."""
    found = set()
    for file, runs in _gb_files(BASELINE).items():
        for r in runs:
            for metric in r.counters:
                if gated_rule(file, r.run_name, metric):
                    found.add((file, r.run_name, metric))
    return found


M = len(gated_in_baseline())


def ci_pairs():
    """--pairs of the CI form that docs/regression.md shows as a CI job."""
    text = open(os.path.join(ROOT, "docs", "regression.md"), encoding="utf-8").read()
    job = text[text.index("## The CI job"):]
    return int(re.search(r"tools/ab\.sh --pairs=(\d+)", job).group(1))


def test_every_gated_entry_gates_something_in_the_quick_run():
    found = gated_in_baseline()
    for g in GATED:
        assert any(f == g.file and m == g.metric and re.search(g.benchmark, b) for f, b, m in found), g
    # busbw of 3 collectives at 2 sizes, step and communication time of 6 stages, 4 kernels.
    assert M == 3 * 2 + 6 * 2 + 4
    # The count docs/regression.md gives, and the error it computes from it.
    text = open(os.path.join(ROOT, "docs", "regression.md"), encoding="utf-8").read()
    assert f"that is {M} gated timings" in text and f"0.05 / {M} = {E / M:.2g}" in text


def test_ci_form_runs_the_families_that_hold_the_gated_files():
    import run_table
    table = run_table.load()
    text = open(os.path.join(ROOT, "docs", "regression.md"), encoding="utf-8").read()
    job = text[text.index("## The CI job"):]
    only = re.search(r"tools/ab\.sh --pairs=\d+ --only=([a-z_,]+)", job).group(1).split(",")
    written = {r.json for r in table.runs if r.family in only}
    assert {g.file for g in GATED} <= written


def test_equal_samples_pass():
    x = np.zeros((M, 8))
    assert not ab_gate.regressed(x, T, E).any()
    assert np.all(ab_gate.p_worse(x) == 1.0)


def test_p_is_the_one_sided_paired_t_test():
    rng = np.random.default_rng(1)
    x = rng.normal(0.02, 0.05, size=(5, 9))
    want = [stats.ttest_1samp(row, 0.0, alternative="greater").pvalue for row in x]
    assert ab_gate.p_worse(x) == pytest.approx(want, rel=1e-9)
    # A pair without a ratio drops out of its metric only.
    y = x.copy()
    y[0, 3] = np.nan
    assert ab_gate.p_worse(y)[0] == pytest.approx(
        stats.ttest_1samp(np.delete(x[0], 3), 0.0, alternative="greater").pvalue)
    assert ab_gate.p_worse(y)[1:] == pytest.approx(want[1:])


def test_holm_rejects_step_down_and_matches_its_adjusted_p():
    p = np.array([0.001, 0.012, 0.02, 0.04, 0.5])
    # 0.001 < 0.05/5, 0.012 < 0.05/4, 0.02 > 0.05/3: stops there.
    assert list(ab_gate.holm(p, 0.05)) == [True, True, False, False, False]
    assert ab_gate.holm_adjusted(p) == pytest.approx([0.005, 0.048, 0.06, 0.08, 0.5])
    rng = np.random.default_rng(2)
    many = rng.uniform(0, 0.02, size=(200, 12))
    assert np.array_equal(ab_gate.holm(many, E), ab_gate.holm_adjusted(many) < E)


def test_a_shift_on_one_gated_metric_fails_it_alone():
    rng = np.random.default_rng(3)
    x = rng.normal(0, 0.02, size=(M, 10))
    x[4] += math.log(1.1)
    assert list(np.flatnonzero(ab_gate.regressed(x, T, E))) == [4]


def test_a_certain_change_under_half_the_threshold_does_not_fail():
    x = np.full((M, 10), math.log(1.04)) + np.linspace(-0.001, 0.001, 10)
    assert np.all(ab_gate.p_worse(x) < 1e-9)
    assert not ab_gate.regressed(x, T, E).any()


def test_rank_tests_cannot_reach_the_corrected_level_with_few_pairs():
    # Why a t-test: the smallest one-sided p of a sign or signed-rank test is 2^-n.
    assert 2.0 ** -6 > E / M and 2.0 ** -8 > E / M
    x = np.full((M, 6), 0.2) + np.linspace(0, 0.01, 6)  # 20% worse on every pair
    assert ab_gate.regressed(x, T, E).all()


@pytest.mark.parametrize("shape", ["normal", "heavy", "shared"])
def test_correction_keeps_the_false_alarm_rate_of_a_run_at_its_target(shape):
    # 10,000 A/A runs of the CI form's gated timings: the share of runs with any regression.
    # A spread of 10% per pair, so that Holm's level, not the floor of half the threshold,
    # is what stops a false alarm (at a few % the floor alone would hide an uncorrected gate).
    n, sd = ci_pairs(), 0.1
    rng = np.random.default_rng({"normal": 11, "heavy": 12, "shared": 13}[shape])
    if shape == "normal":
        x = rng.normal(0, sd, size=(RUNS, M, n))
    elif shape == "heavy":  # a wild pair now and then: Student's t with 3 degrees of freedom
        x = sd * rng.standard_t(3, size=(RUNS, M, n))
    else:  # a machine that slows every metric of a pair together, and a little of its own
        x = sd * rng.normal(size=(RUNS, 1, n)) + sd / 3 * rng.normal(size=(RUNS, M, n))
    failed = ab_gate.regressed(x, T, E).any(axis=-1).mean()
    # At most the target, within three standard errors of 10,000 draws.
    assert failed <= E + 3 * math.sqrt(E * (1 - E) / RUNS), failed
    if shape == "normal":
        # Independent and normal, Holm spends nearly all of it: 1 - (1 - E/M)^M, 4.9%.
        assert failed >= E - 5 * math.sqrt(E * (1 - E) / RUNS), failed
        # Uncorrected, the same tests at 5% each fail most runs of unchanged code.
        naive = ((ab_gate.p_worse(x) < E) & (x.mean(axis=-1) > ab_gate.floor(T))).any(axis=-1).mean()
        assert naive > 0.5, naive


def test_detectable_is_what_the_gate_catches_in_95_percent_of_runs():
    n, sd = ci_pairs(), 0.03
    rng = np.random.default_rng(21)
    x = rng.normal(0, sd, size=(RUNS, M, n))
    # The spread of a typical run, and the shift that run says it could detect.
    shift = math.log1p(float(np.median(ab_gate.detectable(x[:, 0:1, :].repeat(M, 1), T, E)[:, 0])))
    x[:, 0, :] += shift
    flagged = ab_gate.regressed(x, T, E)
    caught = flagged[:, 0].mean()
    assert 0.9 <= caught <= 0.99, caught
    # ... and Holm keeps the others quiet (strong control): a false alarm elsewhere is rare.
    assert flagged[:, 1:].any(axis=-1).mean() <= E


def test_pairs_needed_reach_the_threshold_and_one_fewer_does_not():
    rng = np.random.default_rng(31)
    base = rng.normal(size=(3, 6))
    base = (base - base.mean(axis=1, keepdims=True)) / base.std(axis=1, ddof=1, keepdims=True)
    x = base * np.array([[0.01], [0.05], [0.2]])  # spreads of 1%, 5% and 20% per pair
    need = ab_gate.pairs_needed(x, T, E)
    assert need[0] <= 6 < need[1] < need[2]
    assert need[2] <= ab_gate.MAX_PAIRS

    def reach(sd, k):
        sig, pw = ab_gate._critical(k, 3, E)
        se = sd / math.sqrt(k)
        return math.expm1(max((sig + pw) * se, ab_gate.floor(T) + pw * se))

    for sd, k in ((0.05, need[1]), (0.2, need[2])):
        assert reach(sd, k) <= T < reach(sd, k - 1)
    # A spread that no number of pairs in reach would bring down says so.
    assert ab_gate.pairs_needed(base[:1] * 5.0, T, E)[0] == ab_gate.MAX_PAIRS + 1


def test_a_thousand_noisy_timings_outside_the_gate_do_not_fail(tmp_path):
    # The committed quick run as A in 5 pairs; B the same, but every timing outside the gate
    # made worse: half of them wild in both directions, half certainly 30% to 3x worse. The
    # gated timings and every exact metric are A's. The run passes; the report lists the rest.
    rng = np.random.default_rng(41)
    docs = {}
    for name in sorted(os.listdir(BASELINE)):
        doc = gbjson.load_json(os.path.join(BASELINE, name)) if name.endswith(".json") else None
        if doc and gbjson.is_gb(doc):
            docs[name] = doc
    wild = certain = 0
    for pair in range(5):
        for side in ("A", "B"):
            for name, doc in docs.items():
                folder = tmp_path / side / f"p{pair:02d}" / os.path.splitext(name)[0]
                os.makedirs(folder)
                if side == "A":
                    shutil.copy(os.path.join(BASELINE, name), folder / name)
                    continue
                d = json.loads(json.dumps(doc))
                for r in d["benchmarks"]:
                    for key, v in list(r.items()):
                        k = kind(key)
                        if (k not in ("lower", "higher") or isinstance(v, bool)
                                or not isinstance(v, (int, float)) or gated_rule(name, r["run_name"], key)):
                            continue
                        if zlib.crc32(f"{r['run_name']} {key}".encode()) % 2:
                            f, wild = math.exp(rng.normal(0, 0.5)), wild + 1
                        else:
                            f, certain = math.exp(rng.uniform(0.27, 1.1)), certain + 1
                        r[key] = v * f if k == "lower" else v / f
                (folder / name).write_text(json.dumps(d), encoding="utf-8")
    assert wild + certain > 5 * 1000
    r = run_tool("ab.py", tmp_path, "--no-figures")
    assert r.returncode == 0, r.stdout + r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith(f"PASS: 0 of {M} gated timings regressed, 0 of ") and " 0 benchmarks or metrics lost" in first
    text = (tmp_path / "ab.md").read_text(encoding="utf-8")
    counts = dict((v, int(n)) for n, v in re.findall(r"(\d+) (worse \(not gated\)|too noisy)",
                                                     text[text.index("Reported, not gated:"):].split("\n")[0]))
    assert counts["worse (not gated)"] > 400 and counts["too noisy"] > 300, counts
