"""plots/ab/ab.py on crafted A/B folders: drift cancels, a planted slowdown on a gated timing fails
where it was planted and nowhere else, timings that are not gated never fail however noisy or
worse, the report's first lines say what the pairs could see, exact metrics and missing runs
fail."""

import csv
import os

import pytest

from results_fixture import doc, row, run_tool, write

OPS = ("all_reduce", "reduce_scatter", "all_gather")
SIZES = (4096, 1 << 20)
# The machine per pair: both sides of a pair see the same speed, pairs differ by up to 2x.
DRIFT = (1.0, 1.4, 0.8, 1.1, 1.6, 0.9, 1.2)
# Small differences between the two runs of one pair, as real runs have.
JITTER = (1.0, 1.01, 0.99, 1.02, 0.985, 1.0, 1.015)


def collectives(pair, slow=None, reps=1, outlier=False):
    """zb_collectives rows for one run; slow = {op: factor}; outlier adds a 5x repetition."""
    rows = []
    for op in OPS:
        for size in SIZES:
            us = (10.0 + size / 1e4) * DRIFT[pair] * (slow or {}).get(op, 1.0)
            times = [us] * reps
            if outlier:
                times[-1] = 5 * us
            for rep, t in enumerate(times):
                rows.append(row(f"{op}/bytes:{size}/dtype:bf16/iterations:5/manual_time", t, "us",
                                rep=rep, reps=reps, ranks=2, bytes=size, wrong=0,
                                algbw_GBps=size / t / 1e3, busbw_GBps=size / t / 1e3,
                                wire_bytes_formula=size / 2))
    return doc(rows)


def zero(pair, step_factor=1.0, slow=None, **changed):
    """zb_zero rows for one run; slow = {stage: factor} of its step_s alone."""
    rows = []
    for stage, bpp in (("dp", 16.0), ("z3", 4.0)):
        step = 0.02 * DRIFT[pair] * step_factor
        counters = dict(ranks=2, params=2e6, volume_psi_accounted=2.0,
                        bytes_per_param_measured=bpp + 0.006,
                        step_s=step, comm_s=step / 2, overlap_eff=0.5, exposed_comm_s=step / 4)
        counters.update(changed)
        counters["step_s"] *= (slow or {}).get(stage, 1.0)
        rows.append(row(f"zero/stage:{stage}/params:2000000/iterations:3/manual_time",
                        step * 1e3, "ms", **counters))
    return doc(rows)


def ab_folder(path, pairs=7, b_collectives=None, b_zero=None, skip=()):
    """A/pNN/<family>/<file> and B/...; b_* (pair -> document) replace B's runs; skip holds
    (side, pair, file) runs left out."""
    for i in range(pairs):
        pair = f"p{i + 1:02d}"
        for side in ("A", "B"):
            files = {"collectives.json": collectives(i), "zero.json": zero(i)}
            if side == "B":
                files["collectives.json"] = (b_collectives or collectives)(i)
                files["zero.json"] = (b_zero or zero)(i)
                # B's runs differ a little from A's in every pair, as real runs do.
                for r in files["zero.json"]["benchmarks"]:
                    r["real_time"] *= JITTER[i]
                    r["step_s"] *= JITTER[i]
            for name, d in files.items():
                if (side, pair, name) in skip:
                    continue
                family = os.path.splitext(name)[0]
                os.makedirs(path / side / pair / family, exist_ok=True)
                write(path / side / pair / family / name, d)
            write(path / side / pair / "manifest.json", {"not": "google benchmark"})
    return path


def ab(folder, *flags):
    """plots/ab/ab.py as tools/ab.sh runs it; figures only where a test looks at them."""
    return run_tool("ab.py", folder, "--no-figures", *flags)


def rows_of(ab_md, verdict):
    """(benchmark, metric) of the per-file tables' rows with that verdict."""
    text = ab_md.read_text(encoding="utf-8")
    every = text[text.index("### Every metric"):]
    out = []
    for line in every.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 7 and (cells[6] == verdict or cells[6].startswith(verdict + " (")):
            out.append((cells[0], cells[1]))
    return out


def test_drift_between_pairs_cancels(tmp_path):
    d = ab_folder(tmp_path / "ab")
    r = ab(d)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1].startswith("PASS")
    assert not rows_of(d / "ab.md", "REGRESSION") and not rows_of(d / "ab.md", "too noisy")
    ok = rows_of(d / "ab.md", "ok")
    assert ("zero/stage:z3/params:2000000/iterations:3/manual_time", "step_s") in ok
    assert len([m for _, m in ok if m == "busbw_GBps"]) == len(OPS) * len(SIZES)


def gated_rows(ab_md):
    """(benchmark, metric, verdict) of the gate's table, the report's first table."""
    text = ab_md.read_text(encoding="utf-8")
    table = text[text.index("| benchmark | metric | pairs | B/A | interval | p (Holm)"):]
    out = []
    for line in table.split("\n\n")[0].splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        out.append((cells[0], cells[1], cells[7].split(" (")[0]))
    return out


MIB_ALL_REDUCE = "all_reduce/bytes:1048576/dtype:bf16/iterations:5/manual_time"
Z3 = "zero/stage:z3/params:2000000/iterations:3/manual_time"


def test_planted_slowdown_is_flagged_on_its_collective_only(tmp_path):
    d = ab_folder(tmp_path / "ab", b_collectives=lambda i: collectives(i, {"all_reduce": 1.2}))
    r = ab(d)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.splitlines()[0].startswith("FAIL: 1 of 7 gated timings regressed")
    assert r.stdout.splitlines()[-1] == r.stdout.splitlines()[0]
    # The gate fails on the one gated timing of all_reduce (busbw at 1 MiB; 4 KiB is not gated).
    assert rows_of(d / "ab.md", "REGRESSION") == [(MIB_ALL_REDUCE, "busbw_GBps")]
    # all_reduce's other timings are worse too, reported and not gated.
    worse = rows_of(d / "ab.md", "worse (not gated)")
    assert {b.split("/")[0] for b, _ in worse} == {"all_reduce"} and len(worse) == 5
    text = (d / "ab.md").read_text(encoding="utf-8")
    assert "| 0.8333 | 0.8333 .. 0.8333 |" in text  # B/A of a rate, and its interval
    verdicts = {(b, m): v for b, m, v in gated_rows(d / "ab.md")}
    assert len(verdicts) == 7 and verdicts.pop((MIB_ALL_REDUCE, "busbw_GBps")) == "REGRESSION"
    assert set(verdicts.values()) == {"ok"}
    assert not rows_of(d / "ab.md", "too noisy")


def test_planted_stage_step_is_flagged_on_its_stage_only(tmp_path):
    # 12% slower z3 steps, with the jitter of real runs: only z3's step_s fails; its comm_s
    # and dp's step do not.
    d = ab_folder(tmp_path / "ab", b_zero=lambda i: zero(i, slow={"z3": 1.12}))
    r = ab(d)
    assert r.returncode == 1, r.stdout + r.stderr
    assert rows_of(d / "ab.md", "REGRESSION") == [(Z3, "step_s")]
    assert [x for x in gated_rows(d / "ab.md") if x[2] != "ok"] == [(Z3, "step_s", "REGRESSION")]


def test_small_certain_change_of_a_gated_timing_does_not_fail(tmp_path):
    # 3% slower on every pair: beyond chance, but under half the threshold.
    d = ab_folder(tmp_path / "ab", b_zero=lambda i: zero(i, slow={"z3": 1.03}))
    r = ab(d)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not rows_of(d / "ab.md", "REGRESSION")


def test_repetitions_within_a_run_enter_as_their_median(tmp_path):
    d = ab_folder(tmp_path / "ab", b_collectives=lambda i: collectives(i, reps=3, outlier=True))
    r = ab(d)
    assert r.returncode == 0, r.stdout + r.stderr


def test_noisy_timings_that_are_not_gated_never_fail(tmp_path):
    # Every timing outside the gate wild and much worse in B: reported, the run passes.
    noise = (0.7, 1.9, 1.0, 2.6, 0.9, 3.2, 1.4)

    def wild(i):
        d = collectives(i)
        for r in d["benchmarks"]:
            if "bytes:4096/" in r["name"]:
                r["real_time"] *= 2 * noise[i]
                r["algbw_GBps"] /= 2 * noise[i]
                r["busbw_GBps"] /= 2 * noise[i]
        return d

    d = ab_folder(tmp_path / "ab", b_collectives=wild,
                  b_zero=lambda i: zero(i, exposed_comm_s=0.03 * noise[i], overlap_eff=0.1 * noise[i]))
    r = ab(d)
    assert r.returncode == 0, r.stdout + r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("PASS: 0 of 7 gated timings regressed, 0 of 32 exact metrics differ")
    assert len(rows_of(d / "ab.md", "worse (not gated)")) + len(rows_of(d / "ab.md", "too noisy")) == 13
    assert {v for _, _, v in gated_rows(d / "ab.md")} == {"ok"}
    assert "Reported, not gated: 21 timed metrics:" in (d / "ab.md").read_text(encoding="utf-8")


def test_noisy_gated_timing_says_how_many_pairs_it_needs(tmp_path):
    noise = (0.7, 1.3, 1.0, 1.1, 0.9, 1.2, 0.8)
    d = ab_folder(tmp_path / "ab", b_zero=lambda i: zero(i, comm_s=0.01 * DRIFT[i] * noise[i]))
    r = ab(d)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("PASS: 0 of 7 gated timings regressed")
    # Detectable: (t(1 - 0.05/7, 6) + t(0.95, 6)) x the standard error of the log ratios.
    assert lines[1].startswith("Detectable (caught in 95% of runs) with 7 pairs: 5% to ")
    assert "5 of 7 gated timings reach the 10% threshold" in lines[1]
    assert lines[2].startswith("Pairs: ") and "more) would bring every gated timing to 10%" in lines[2]
    assert [m for _, m, v in gated_rows(d / "ab.md") if v == "too noisy"] == ["comm_s", "comm_s"]
    assert ab(d, "--undecided=fail").returncode == 1


def test_exact_metrics_must_match_and_pages_are_tolerated(tmp_path):
    d = ab_folder(tmp_path / "ab",
                  b_zero=lambda i: zero(i, bytes_per_param_measured=16.006 + 0.004))
    r = ab(d)
    # dp within a page of A's 16.006; z3's 4.006 -> 16.01 is a real change.
    assert r.returncode == 1, r.stdout
    assert rows_of(d / "ab.md", "MISMATCH") == [
        ("zero/stage:z3/params:2000000/iterations:3/manual_time", "bytes_per_param_measured")]
    d = ab_folder(tmp_path / "ab2", b_zero=lambda i: zero(i, volume_psi_accounted=3.0))
    assert ab(d).returncode == 1
    assert len(rows_of(d / "ab.md", "MISMATCH")) == 2


def test_benchmark_lost_by_b_fails(tmp_path):
    d = ab_folder(tmp_path / "ab", skip={("B", "p03", "zero.json")})
    r = ab(d)
    assert r.returncode == 1, r.stdout
    assert "not in B's runs of pairs p03" in (d / "ab.md").read_text(encoding="utf-8")
    # A run lost by A only drops that pair: six pairs still decide.
    d = ab_folder(tmp_path / "ab2", skip={("A", "p03", "zero.json")})
    r = ab(d)
    assert r.returncode == 0, r.stdout
    assert "| 6 |" in (d / "ab.md").read_text(encoding="utf-8")


def test_figure_csv_holds_the_numbers_of_the_table(tmp_path):
    d = ab_folder(tmp_path / "ab", b_collectives=lambda i: collectives(i, {"all_reduce": 1.2}))
    assert run_tool("ab.py", d).returncode == 1
    for stem in ("ab_collectives", "ab_zero"):
        for ext in ("png", "pdf", "csv"):
            assert (d / "figures" / f"{stem}.{ext}").stat().st_size > 0
    with open(d / "figures" / "ab_collectives.csv", newline="", encoding="utf-8") as f:
        drawn = list(csv.DictReader(f))
    assert len(drawn) == len(OPS) * len(SIZES) * 3
    for r in drawn:
        # Oriented so that > 1 is worse: a 20% longer time and the matching lower bandwidth.
        expected = 1.2 if r["benchmark"].startswith("all_reduce") else 1.0
        assert float(r["worse_median"]) == pytest.approx(expected), r
        gated = r["benchmark"] == MIB_ALL_REDUCE and r["metric"] == "busbw_GBps"
        assert r["verdict"] == ("ok" if expected == 1 else "REGRESSION" if gated else "worse (not gated)")


@pytest.mark.parametrize("damage", ["no_b", "pair_names", "four_pairs", "bad_json", "empty"])
def test_bad_input_exits_2_with_one_line_and_no_report(tmp_path, damage):
    d = ab_folder(tmp_path / "ab", pairs=4 if damage == "four_pairs" else 7)
    if damage == "no_b":
        os.rename(d / "B", d / "C")
    elif damage == "pair_names":
        os.rename(d / "B" / "p07", d / "B" / "p08")
    elif damage == "bad_json":
        (d / "B" / "p02" / "zero" / "zero.json").write_text("{truncated")
    elif damage == "empty":
        for side in ("A", "B"):
            for i in range(7):
                for fam in ("collectives", "zero"):
                    os.remove(d / side / f"p{i + 1:02d}" / fam / f"{fam}.json")
    r = ab(d)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (d / "ab.md").exists()


@pytest.mark.parametrize("flag", ["--threshold=0", "--threshold=x", "--confidence=1", "--error=0",
                                  "--error=1", "--tolerance=bytes_per_param", "--undecided=maybe"])
def test_bad_flag_exits_2_with_one_line(tmp_path, flag):
    r = ab(ab_folder(tmp_path / "ab"), flag)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def _without(metric, value=None):
    """B's zb_collectives rows with busbw_GBps dropped (value None) or set to value."""
    def b(i):
        d = collectives(i)
        for r in d["benchmarks"]:
            if value is None:
                r.pop(metric, None)
            else:
                r[metric] = value
        return d
    return b


@pytest.mark.parametrize("change,lost,what", [
    (None, 6, "metric gone from B"),  # B stopped writing it: every size's, gated or not
    (0.0, 3, "B has no usable value in 7 pairs where A has one"),  # the gated 1 MiB ones at 0
    (float("nan"), 3, "B has no usable value in 7 pairs where A has one"),
])
def test_a_gated_timing_b_lost_fails_as_lost(tmp_path, change, lost, what):
    """A gated bandwidth that B no longer measures (dropped, 0, NaN) is lost, whatever the gate
    could have said of a timing: the run fails and says so."""
    d = ab_folder(tmp_path / "ab", b_collectives=_without("busbw_GBps", change))
    r = ab(d)
    assert r.returncode == 1, r.stdout + r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("FAIL:") and f"{lost} benchmarks or metrics lost" in first, first
    assert any(what in line and "busbw_GBps" in line for line in r.stdout.splitlines()), r.stdout


def test_a_signed_error_is_judged_by_its_size(tmp_path):
    """comm_error of +0.5, -0.5 and +0.01 over three repetitions against A's +0.05 throughout:
    the median of the signed values (+0.01) would read as better; of their sizes, 0.5, worse."""
    def with_error(values):
        def z(i):
            d = zero(i)
            rows = []
            for r in d["benchmarks"]:
                for rep, v in enumerate(values):
                    rows.append(dict(r, repetition_index=rep, repetitions=len(values), comm_error=v))
            d["benchmarks"] = rows
            return d
        return z
    d = ab_folder(tmp_path / "ab", b_zero=with_error((0.5, -0.5, 0.01)))
    for i in range(7):  # A: +0.05 in every repetition
        write(d / "A" / f"p{i + 1:02d}" / "zero" / "zero.json", with_error((0.05, 0.05, 0.05))(i))
    r = ab(d)
    assert r.returncode == 0, r.stdout + r.stderr
    worse = [m for _, m in rows_of(d / "ab.md", "worse (not gated)")]
    assert worse.count("comm_error") == 2, (d / "ab.md").read_text(encoding="utf-8")


def test_a_gated_timing_too_noisy_but_estimated_worse_is_named(tmp_path):
    """B's 1 MiB all-reduce three times slower in three pairs of seven, as fast in the rest: too
    noisy for the gate to call, but its estimate is past the threshold, and the verdict's line
    names it rather than pass it in silence."""
    slow = (3.0, 1.0, 3.0, 1.0, 1.0, 3.0, 1.0)
    d = ab_folder(tmp_path / "ab", b_collectives=lambda i: collectives(i, {"all_reduce": slow[i]}))
    r = ab(d)
    first = r.stdout.splitlines()[0]
    gate = {(b, m): v for b, m, v in gated_rows(d / "ab.md")}
    verdict = next(v for (b, m), v in gate.items() if b.startswith("all_reduce/bytes:1048576"))
    assert verdict == "too noisy", gate
    assert "1 gated timings too noisy to judge though estimated more than 10% worse: " \
        "all_reduce/bytes:1048576" in first, first
