"""tools/ab_trials.py on crafted trial folders (--tally): what counts as an A/A pass and as a
caught plant, the Wilson intervals of the counts, and bad options. No ab.sh is run."""

import csv
import json
import math
import os
import sys

import numpy as np
import pytest

from results_fixture import ROOT
from test_ab import ab_folder, collectives, zero

sys.path.insert(0, os.path.join(ROOT, "tools"))
import ab_trials  # noqa: E402


def trial(root, kind, i, rc, log="", **folder):
    d = ab_folder(root / f"{kind}_{i:02d}", **folder)
    (d / "ab.md").write_text("# crafted\n", encoding="utf-8")
    (d / "ab.log").write_text(log, encoding="utf-8")
    return {"kind": kind, "trial": i, "rc": rc, "seconds": 600 + i, "ok": "", "stage": "", "else": ""}


def tallied(folder, lines, options, capsys):
    """What --tally prints of crafted trials: their options.json and trials.csv written first."""
    (folder / "options.json").write_text(json.dumps(options), encoding="utf-8")
    with open(folder / "trials.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=ab_trials.FIELDS)
        w.writeheader()
        w.writerows(lines)
    assert ab_trials.main([f"--tally={folder}"]) == 0
    return capsys.readouterr().out


def test_tally_counts_clean_passes_and_clean_catches_only(tmp_path, capsys):
    slow_ar = lambda i: collectives(i, {"all_reduce": 1.2})  # noqa: E731
    lines = [
        trial(tmp_path, "aa", 1, 0),                                   # passes
        trial(tmp_path, "aa", 2, 1, b_collectives=slow_ar),            # a false alarm
        trial(tmp_path, "aa", 3, 1, log=f"[ab] 1 {ab_trials.FAILED_RUNS}; see logs\n"),
        # both plants caught and nothing else
        trial(tmp_path, "planted", 1, 1, b_collectives=slow_ar,
              b_zero=lambda i: zero(i, slow={"z3": 1.12})),
        # both caught, but dp's step failed too: neither counts
        trial(tmp_path, "planted", 2, 1, b_collectives=slow_ar,
              b_zero=lambda i: zero(i, slow={"z3": 1.12, "dp": 1.2})),
        # the stage missed
        trial(tmp_path, "planted", 3, 1, b_collectives=slow_ar),
        # a trial without the zero run (ab.sh --only=collectives): its stage was not tried
        trial(tmp_path, "planted", 4, 1, b_collectives=slow_ar,
              skip={(side, f"p{i:02d}", "zero.json") for side in "AB" for i in range(1, 8)}),
    ]
    options = {"trials": 3, "kinds": ["aa", "planted"], "fraction": 0.1, "op": "all_reduce",
               "stage": "z3", "ab": ["--pairs=7", "HEAD", "HEAD", "--", "--quick"]}
    text = tallied(tmp_path, lines, options, capsys)
    assert text == (tmp_path / "trials.md").read_text(encoding="utf-8")
    assert "| A/A runs that passed | 1 | 3 | 0.06 to 0.79 |" in text
    assert "| all_reduce caught, nothing else failed | 3 | 4 | 0.30 to 0.95 |" in text
    assert "| z3 step caught, nothing else failed | 1 | 3 | 0.06 to 0.79 |" in text
    assert "Wall time per trial (the CI form, builds included): 601 to 604 s, median 602 s." in text
    with open(tmp_path / "trials.csv", encoding="utf-8", newline="") as f:
        got = {(x["kind"], x["trial"]): x for x in csv.DictReader(f)}
    assert [got[("aa", str(i))]["ok"] for i in (1, 2, 3)] == ["1", "0", "0"]
    assert got[("aa", "2")]["else"].startswith("all_reduce/bytes:1048576/") and "REGRESSION" in got[("aa", "2")]["else"]
    assert got[("aa", "3")]["else"] == "a benchmark run failed"
    assert [(got[("planted", str(i))]["ok"], got[("planted", str(i))]["stage"]) for i in (1, 2, 3, 4)] == \
        [("1", "1"), ("0", "0"), ("1", "0"), ("1", "n/a")]
    assert got[("planted", "2")]["else"].startswith("zero/stage:dp/") and "step_s REGRESSION" in got[("planted", "2")]["else"]


def test_a_trial_without_a_report_is_listed_apart(tmp_path, capsys):
    os.makedirs(tmp_path / "aa_01")
    (tmp_path / "aa_01" / "ab.log").write_text("ab.sh: BASE does not build\n", encoding="utf-8")
    (tmp_path / "options.json").write_text(json.dumps(
        {"trials": 1, "kinds": ["aa"], "fraction": 0.1, "op": "all_reduce", "stage": "z2",
         "ab": ["HEAD"]}), encoding="utf-8")
    (tmp_path / "trials.csv").write_text("kind,trial,rc,seconds,ok,stage,else\naa,1,2,30,,,\n",
                                         encoding="utf-8")
    assert ab_trials.main([f"--tally={tmp_path}"]) == 0
    text = capsys.readouterr().out
    assert "| A/A runs that passed | 0 | 0 | - |" in text
    assert "1 trials did not finish: ab.sh exit 2 (no ab.md)" in text


def test_wilson_matches_its_closed_forms():
    z2 = 1.959964 ** 2
    assert ab_trials.wilson(20, 20) == pytest.approx((20 / (20 + z2), 1.0))
    assert ab_trials.wilson(0, 3) == pytest.approx((0.0, z2 / (3 + z2)))
    lo, hi = ab_trials.wilson(19, 20)
    assert (round(lo, 4), round(hi, 4)) == (0.7639, 0.9911)
    # The count the report says shows 95%: 73 of 73 and not 72 of 72.
    assert ab_trials.wilson(73, 73)[0] >= 0.95 > ab_trials.wilson(72, 72)[0]
    assert all(math.isnan(v) for v in ab_trials.wilson(0, 0))


@pytest.mark.parametrize("argv", [
    [], ["--trials=0", "--", "HEAD"], ["--kinds=ab", "--", "HEAD"], ["--fraction=-1", "--", "HEAD"],
    ["--fraction=x", "--", "HEAD"], ["--nope", "--", "HEAD"], ["--", "--out=x", "HEAD"], ["--"],
    ["--tally=x", "--trials=3"],
])
def test_bad_options_exit_2_with_one_line(argv, capsys):
    with pytest.raises(SystemExit) as e:
        ab_trials.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("ab_trials: ") and err.count("\n") == 1, err


def test_tally_of_an_unreadable_folder_exits_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        ab_trials.main([f"--tally={tmp_path}"])
    assert e.value.code == 2 and capsys.readouterr().err.startswith("ab_trials: --tally: cannot read")


def _keys_and_noise(shifts, pairs=40, spread=0.03, seed=5):
    """Gated keys of a crafted pool: every all_reduce and step_s of dp and z2, each a row of
    `pairs` normal log worsenings of this spread, moved by shifts[key index]."""
    keys = [("collectives.json", "all_reduce/bytes:65536/dtype:bf16", "busbw_GBps"),
            ("zero.json", "zero/stage:dp/params:2000000", "step_s"),
            ("zero.json", "zero/stage:z2/params:2000000", "step_s"),
            ("zero.json", "zero/stage:z2/params:2000000", "comm_s")]
    rng = np.random.default_rng(seed)
    x = rng.normal(0, spread, size=(len(keys), pairs)) + np.array(shifts)[:, None]
    return keys, x


def test_resampled_plants_are_caught_only_when_nothing_else_moved():
    ten = math.log(1.1)
    # all_reduce and z2's step 10% worse with a 3% spread: caught in practically every draw.
    keys, x = _keys_and_noise([ten, 0, ten, 0])
    clean, op, stage = ab_trials.resample(keys, x, 10, 0.1, 0.05, "all_reduce", "z2", draws=2000)
    assert op > 0.99 and stage > 0.99 and clean < 0.01
    # dp's step also 10% worse: nothing counts as caught, since something else failed.
    keys, x = _keys_and_noise([ten, ten, ten, 0])
    _, op, stage = ab_trials.resample(keys, x, 10, 0.1, 0.05, "all_reduce", "z2", draws=2000)
    assert op < 0.01 and stage < 0.01
    # No shift at all: the gate passes in at least its 95%, and catches nothing.
    keys, x = _keys_and_noise([0, 0, 0, 0])
    clean, op, stage = ab_trials.resample(keys, x, 10, 0.1, 0.05, "all_reduce", "z2", draws=2000)
    assert clean >= 0.95 and op < 0.05 and stage < 0.05


def test_tally_resamples_each_kind_from_its_own_trials(tmp_path, capsys):
    # Two A/A trials, one whose B ran every all_reduce 8% slower (its pairs off no change: the
    # real count fails it, the resampled pool is moved back), and two planted trials whose
    # all_reduce is 20% slower and z3 step 12% slower.
    a_bit = lambda i: collectives(i, {"all_reduce": 1.08})  # noqa: E731
    slow_ar = lambda i: collectives(i, {"all_reduce": 1.2})  # noqa: E731
    lines = [trial(tmp_path, "aa", 1, 0, b_collectives=a_bit), trial(tmp_path, "aa", 2, 0),
             trial(tmp_path, "planted", 1, 1, b_collectives=slow_ar,
                   b_zero=lambda i: zero(i, slow={"z3": 1.12})),
             trial(tmp_path, "planted", 2, 1, b_collectives=slow_ar,
                   b_zero=lambda i: zero(i, slow={"z3": 1.12}))]
    options = {"trials": 2, "kinds": ["aa", "planted"], "fraction": 0.1, "op": "all_reduce",
               "stage": "z3", "ab": ["--pairs=7", "HEAD", "HEAD", "--", "--quick"]}
    text = tallied(tmp_path, lines, options, capsys)
    assert "| A/A runs that passed | 1 | 2 | 0.09 to 0.91 |" in text
    assert ("- 10,000 trials of 7 pairs drawn with replacement from the 14 A/A pairs of 2 trials, "
            "each timing's median pair made no change: no gated timing failed in 100.0% of them.") in text
    assert ("- 10,000 trials of 7 pairs drawn with replacement from the 14 planted pairs of 2 "
            "trials, the other timings' median pair made no change: all_reduce caught and nothing "
            "else in 100.0%, z3 step caught and nothing else in 100.0%.") in text


def test_a_plant_caught_beside_a_timing_too_noisy_to_judge_is_not_clean(tmp_path, capsys):
    """With --undecided=fail a gated timing too noisy to judge fails the run: a planted trial
    whose plants were caught then did not pass cleanly, and an A/A trial failed, each saying
    which timing."""
    wobble = (0.6, 1.6, 0.7, 1.5, 0.65, 1.55, 1.0)  # around 1: no worse, far too noisy

    def noisy(slow):
        def b(i):
            return collectives(i, dict(slow, reduce_scatter=wobble[i]))
        return b
    lines = [trial(tmp_path, "aa", 1, 1, b_collectives=noisy({})),
             trial(tmp_path, "planted", 1, 1, b_collectives=noisy({"all_reduce": 1.2}),
                   b_zero=lambda i: zero(i, slow={"z3": 1.12}))]
    options = {"trials": 1, "kinds": ["aa", "planted"], "fraction": 0.1, "op": "all_reduce", "stage": "z3",
               "ab": ["--pairs=7", "--undecided=fail", "HEAD", "HEAD", "--", "--quick"]}
    tallied(tmp_path, lines, options, capsys)
    with open(tmp_path / "trials.csv", encoding="utf-8", newline="") as f:
        got = {(x["kind"], x["trial"]): x for x in csv.DictReader(f)}
    assert got[("aa", "1")]["ok"] == "0" and "reduce_scatter/bytes:1048576/" in got[("aa", "1")]["else"]
    assert "too noisy" in got[("aa", "1")]["else"], got
    assert (got[("planted", "1")]["ok"], got[("planted", "1")]["stage"]) == ("0", "0"), got
    assert "reduce_scatter/bytes:1048576/" in got[("planted", "1")]["else"], got
