"""The summary's "check these" list for predictions, on crafted results: communication alone
off by more than 10%, exposed communication by more than 25% or, under 4 ms, by more than 1 ms
(plots/tolerances.py), each named with its reason; within those bars nothing is listed. The
quantized configurations' section and figure are test_summary_quantized.py's."""

import pytest

from results_fixture import doc, manifest, row, run_tool, spread_z2, write, zero

ZERO_NAME = "zero/stage:{}/params:1048576/compute:spin:200"


def predicted(context=None, counters=None, **by_stage):
    """predict.json with the names of zero()'s benchmarks: {stage: (comm predicted, comm measured,
    exposed predicted, exposed measured)}; `context` adds keys to its context, `counters`
    ({stage: {name: value}}) counters to a stage's row."""
    rows = []
    for stage, (cp, cm, ep, em) in by_stage.items():
        rows.append(row(ZERO_NAME.format(stage), 1.0, "ms", ranks=4, params=1048576, collectives=3,
                        comm_s_predicted=cp, comm_s_measured=cm, comm_error=cp / cm - 1,
                        exposed_comm_s_predicted=ep, exposed_comm_s_measured=em, exposed_error=ep / em - 1,
                        exposed_error_s=ep - em, extrapolated=0, modelled=0, **(counters or {}).get(stage, {})))
    return doc(rows, **(context or {}))


@pytest.fixture
def folder(tmp_path):
    write(tmp_path / "manifest.json", manifest())
    return tmp_path


def findings(folder):
    r = run_tool("summary.py", folder)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (folder / "summary.md").read_text(encoding="utf-8")
    screen = text.splitlines()[:text.splitlines().index("# Details")]
    return [line for line in screen if "predicted more than" in line]


def test_within_the_bars_nothing_is_listed(folder):
    write(folder / "zero.json", zero())
    # comm +9%; exposed 3 ms measured and 0.8 ms off (under 4 ms: 1 ms allowed); exposed 10 ms
    # measured and 24% off.
    write(folder / "predict.json", predicted(dp=(0.00436, 0.004, 0.0022, 0.003), z1=(0.004, 0.004, 0.0076, 0.010)))
    assert findings(folder) == []


def test_outside_the_bars_each_is_named_with_its_reason(folder):
    # z1 waited 2.5 ms of its measured exposed time for a late rank (rank 1): that is the reason
    # its exposed time is predicted short.
    write(folder / "zero.json", zero(z1={"skew_wait_s": 0.0025, "late_rank": 1}))
    write(folder / "predict.json", predicted(dp=(0.0046, 0.004, 0.0015, 0.003), z1=(0.004, 0.004, 0.0074, 0.010)))
    found = findings(folder)
    # One line per check and reason: comm for dp; exposed for dp (no cause known) and for z1
    # (its late rank).
    assert len(found) == 3, found
    comm = [f for f in found if "`comm_error`" in f]
    assert len(comm) == 1 and "dp +15.0% (4.60 ms predicted, 4.00 measured)" in comm[0]
    assert "--trace-round=comm" in comm[0], comm  # the round comm_s times, traced to explain it
    exposed = [f for f in found if "`exposed_error`" in f]
    assert all("more than 25% off, or more than 1 ms where under 4 ms" in f for f in exposed)
    dp = next(f for f in exposed if " dp " in f)
    assert "dp -50.0% (1.50 ms predicted, 3.00 measured)" in dp and "no cause known" in dp
    assert "--explain" in dp and "--trace-round" not in dp
    z1 = next(f for f in exposed if " z1 " in f)
    assert "z1 -26.0% (7.40 ms predicted, 10.00 measured; 2.50 ms waiting for a late rank" in z1
    assert "rank 1 most often" in z1


def test_an_exposed_time_that_moves_further_than_the_collectives_says_how_far(folder):
    # All 40% short; z2's exposed time moves 4 times as far as its collectives' (the stream's
    # backlog gains on compute), no cause known: -10.0% in the collectives to first order. dp's
    # moves less than they do (0.7): nothing added. z1's moves 4 times as far too, but its
    # reason is a late rank, not the collectives: nothing added.
    write(folder / "zero.json", zero(z1={"skew_wait_s": 0.0035, "late_rank": 1}))
    per_comm = {s: {"exposed_per_comm": k} for s, k in (("z2", 4.0), ("dp", 0.7), ("z1", 4.0))}
    write(folder / "predict.json", predicted(counters=per_comm, dp=(0.004, 0.004, 0.006, 0.010),
                                             z1=(0.004, 0.004, 0.006, 0.010), z2=(0.004, 0.004, 0.006, 0.010)))
    found = findings(folder)
    assert len(found) == 3, found
    z2 = next(f for f in found if " z2 " in f)
    assert "no cause known" in z2
    assert "z2 -40.0% (6.00 ms predicted, 10.00 measured; per comm 4.0: collectives -10.0%)" in z2
    assert "`per comm` beside a stage: its exposed time moves that many times as far" in z2
    dp = next(f for f in found if " dp " in f)
    assert "no cause known" in dp and "exposed_per_comm" not in dp
    assert "dp -40.0% (6.00 ms predicted, 10.00 measured)" in dp
    z1 = next(f for f in found if " z1 " in f)
    assert "late rank" in z1 and "exposed_per_comm" not in z1


def test_the_details_give_each_prediction_with_its_per_comm(folder):
    # The prediction table in the details: each stage's errors and how far its exposed time
    # moves with the collectives (n/a where zb_predict wrote none).
    write(folder / "zero.json", zero())
    write(folder / "predict.json", predicted(counters={"z1": {"exposed_per_comm": 2.25}},
                                             dp=(0.004, 0.004, 0.003, 0.003), z1=(0.004, 0.004, 0.003, 0.003)))
    assert run_tool("summary.py", folder).returncode == 0
    text = (folder / "summary.md").read_text(encoding="utf-8")
    section = text[text.index("## Prediction: each stage"):].split("\n\n")[1].splitlines()
    assert section[0].startswith("| stage |") and "| per comm |" in section[0], section
    column = section[0].split("|").index(" per comm ")
    cells = {row.split("|")[1].strip(): row.split("|")[column].strip() for row in section[2:]}
    assert cells == {"dp": "n/a", "z1": "2.25"}, section


def test_a_late_rank_is_the_reason_given(folder):
    write(folder / "zero.json", zero(z1={"skew_wait_s": 0.0025, "late_rank": 1}))
    write(folder / "predict.json", predicted(z1=(0.004, 0.004, 0.0074, 0.010)))
    found = findings(folder)
    assert len(found) == 1, found
    # Results from before the model predicted skew have no skew_wait_s_predicted: not a zero.
    assert "(7.40 ms predicted, 10.00 measured; 2.50 ms waiting for a late rank, rank 1 most often; none " \
        "predicted (no `skew_wait_s_predicted`))" in found[0], found
    assert "the wait for a late rank beside a stage (`skew_wait_s`" in found[0], found


def test_a_late_finish_is_the_reason_given(folder):
    # 2.6 ms short, 2.0 ms of the measured wire part after the other rank had finished: named.
    write(folder / "zero.json", zero(z1={"late_finish_wait_s": 0.002}))
    write(folder / "predict.json", predicted(z1=(0.004, 0.004, 0.0074, 0.010)))
    found = findings(folder)
    assert len(found) == 1, found
    assert "2.00 ms of the measured exposed time came after another rank had already finished" in found[0]
    assert "`late_finish_wait_s`" in found[0]
    # 1.0 ms of it is less than half the shortfall: not the reason.
    write(folder / "zero.json", zero(z1={"late_finish_wait_s": 0.001}))
    found = findings(folder)
    assert len(found) == 1 and "late_finish_wait_s" not in found[0] and "no cause known" in found[0], found


def test_a_late_rank_is_held_to_each_repetitions_own_exposed_time(folder):
    # z2's repetitions (exposed, skew): (10, 4.0), (14, 3.0), (12, 0.5) ms, 6 ms predicted. The
    # medians, 12 ms and 3.0 ms, would say the skew covers half the 6 ms shortfall; but the
    # repetition that measured 12 ms waited 0.5 ms for a late rank, and of the three only the
    # first holds: no cause known.
    document = spread_z2(spread_z2(zero(), "exposed_comm_s", (0.010, 0.014, 0.012)), "skew_wait_s",
                         (0.004, 0.003, 0.0005))
    for b in document["benchmarks"]:
        if "stage:z2" in b["name"] and b["run_type"] == "aggregate":
            b.update(exposed_comm_s=0.012, skew_wait_s=0.003)
    write(folder / "zero.json", document)
    write(folder / "predict.json", predicted(z2=(0.004, 0.004, 0.006, 0.012)))
    found = findings(folder)
    assert len(found) == 1 and "late rank" not in found[0] and "no cause known" in found[0], found
    # Each repetition's skew at least half its own shortfall (4, 3 and 3 ms): the late rank.
    document = spread_z2(document, "skew_wait_s", (0.004, 0.005, 0.0035))
    write(folder / "zero.json", document)
    found = findings(folder)
    assert len(found) == 1 and "waiting for a late rank" in found[0], found


@pytest.mark.parametrize("ranks,named", [
    ((0, 0, 3), "rank 0 most often"),  # the median would say 0 too
    ((1, 3, 3), "rank 3 most often"),
    ((0, 3, 2), None),  # each once: none most often (the median, 2, was named once)
])
def test_the_late_rank_is_the_one_named_most_often(folder, ranks, named):
    document = spread_z2(spread_z2(zero(z2={"skew_wait_s": 0.004}), "late_rank", ranks), "exposed_comm_s",
                         (0.010, 0.010, 0.010))
    for b in document["benchmarks"]:
        if "stage:z2" in b["name"] and b["run_type"] == "aggregate":
            b.update(exposed_comm_s=0.010, late_rank=sorted(ranks)[1])
    write(folder / "zero.json", document)
    write(folder / "predict.json", predicted(z2=(0.004, 0.004, 0.0074, 0.010)))
    found = findings(folder)
    assert len(found) == 1 and "waiting for a late rank" in found[0], found
    if named:
        assert f"late rank, {named};" in found[0], found
    else:
        assert "most often" not in found[0], found


NOISE = "this machine's noise is above the bar"


def test_the_steps_own_spread_is_the_noise_given_and_stands_beside_its_error(folder):
    # z2's comm_s ranged 4.0 to 4.6 ms over its three repetitions: predicted 4.8 against the
    # 4.2 median is +14.3%, within that range widened by the 10% bar (up to 5.06). dp's, one
    # repetition, has no range to give: no cause known.
    write(folder / "zero.json", spread_z2(zero(), "comm_s", (0.0040, 0.0046, 0.0042)))
    write(folder / "predict.json", predicted(dp=(0.0046, 0.004, 0.003, 0.003), z2=(0.0048, 0.0042, 0.003, 0.003)))
    found = findings(folder)
    assert len(found) == 2, found
    z2 = next(f for f in found if " z2 " in f)
    assert "z2 +14.3% (4.80 ms predicted, 4.20 [4.00, 4.60] measured)" in z2 and NOISE in z2
    assert "repetitions ([lowest, highest] beside each), widened by the bar, reach the prediction" in z2
    dp = next(f for f in found if " dp " in f)
    assert "dp +15.0% (4.60 ms predicted, 4.00 measured)" in dp and "no cause known" in dp
    # 4.0 to 4.3 ms: widened by 10%, up to 4.73, short of 4.8: the step's spread is no reason.
    write(folder / "zero.json", spread_z2(zero(), "comm_s", (0.0040, 0.0043, 0.0042)))
    z2 = next(f for f in findings(folder) if " z2 " in f)
    assert "[4.00, 4.30]" in z2 and NOISE not in z2 and "no cause known" in z2
    # A spread that does not reach the error: predicted 10 ms against 4.0 to 4.6 is the model's.
    write(folder / "zero.json", spread_z2(zero(), "comm_s", (0.0040, 0.0046, 0.0042)))
    write(folder / "predict.json", predicted(z2=(0.010, 0.0042, 0.003, 0.003)))
    z2 = findings(folder)[0]
    assert "[4.00, 4.60]" in z2 and NOISE not in z2 and "no cause known" in z2, z2
    # Exposed: 1.0 to 2.5 ms, widened by the 1 ms allowed under 4 ms, reach 3.4 predicted against
    # the 2.0 median; 4.0 they do not.
    write(folder / "zero.json", spread_z2(zero(), "exposed_comm_s", (0.0010, 0.0025, 0.0020)))
    write(folder / "predict.json", predicted(z2=(0.0042, 0.0042, 0.0034, 0.0020)))
    found = findings(folder)
    assert len(found) == 1 and "[1.00, 2.50] measured" in found[0] and NOISE in found[0], found
    write(folder / "predict.json", predicted(z2=(0.0042, 0.0042, 0.0040, 0.0020)))
    found = findings(folder)
    assert len(found) == 1 and NOISE not in found[0], found


def test_the_exposed_spread_widens_each_end_by_its_own_bar(folder):
    # Repetitions of 1.5, 2 and 12 ms: the highest, 12 ms, is allowed 25% (15 ms), which reaches
    # 14.5 predicted; the median's 1 ms (to 13 ms) would not.
    write(folder / "zero.json", spread_z2(zero(), "exposed_comm_s", (0.0015, 0.012, 0.002)))
    write(folder / "predict.json", predicted(z2=(0.0042, 0.0042, 0.0145, 0.002)))
    found = findings(folder)
    assert len(found) == 1 and "[1.50, 12.00] measured" in found[0] and NOISE in found[0], found


@pytest.mark.parametrize("ratios,noisy", [
    ((1.01, 0.98, 1.02, 1.5, 0.97), False),  # one size moved 50%, the typical one 2%: not the noise
    ((1.15, 0.85, 1.2, 1.12, 0.9), True),  # the typical size moved 15%, past the 10% bar
])
def test_the_sweeps_noise_is_its_typical_sizes_not_its_worst(folder, ratios, noisy):
    sweep = [row(f"all_reduce/bytes:{1 << (16 + i)}", 1.0, bare_repeat_ratio=x) for i, x in enumerate(ratios)]
    write(folder / "predict_sweep.json", doc(sweep, command_line="zb_collectives --progress=thread"))
    write(folder / "zero.json", zero())
    write(folder / "predict.json", predicted({"command_line": f"zb_predict --sweep={folder}/predict_sweep.json"},
                                             dp=(0.0046, 0.004, 0.003, 0.003)))
    found = findings(folder)
    assert len(found) == 1, found
    assert (NOISE in found[0]) == noisy and ("no cause known" in found[0]) != noisy, found
    if noisy:
        assert "moved 15% between two runs of the same call at a typical size" in found[0]


def test_the_sweeps_noise_is_given_only_where_it_reaches_the_error(folder):
    # The sweep's calls moved 15% at a typical size: that reaches dp's +15% (within 10% + 15%),
    # not a +200% error, which is the model's.
    sweep = [row(f"all_reduce/bytes:{1 << (16 + i)}", 1.0, bare_repeat_ratio=x)
             for i, x in enumerate((1.15, 0.85, 1.2, 1.12, 0.9))]
    write(folder / "predict_sweep.json", doc(sweep, command_line="zb_collectives --progress=thread"))
    write(folder / "zero.json", zero())
    context = {"command_line": f"zb_predict --sweep={folder}/predict_sweep.json"}
    write(folder / "predict.json", predicted(context, dp=(0.0046, 0.004, 0.003, 0.003)))
    assert NOISE in findings(folder)[0]
    write(folder / "predict.json", predicted(context, dp=(0.012, 0.004, 0.003, 0.003)))
    found = findings(folder)
    assert len(found) == 1 and NOISE not in found[0] and "no cause known" in found[0], found
    # Exposed: 15% of a 20 ms exposed time (3 ms), 1.5 times over as it follows the collectives
    # (per comm 1.5: 4.5 ms), is past its 25% bar (5 ms)? No: the noise does not take it past
    # its bar, so it is no reason. At per comm 3 it moves 9 ms, past the bar, and reaches -60%.
    for k, noisy in ((1.5, False), (3.0, True)):
        write(folder / "predict.json", predicted(context, counters={"z1": {"exposed_per_comm": k}},
                                                 z1=(0.004, 0.004, 0.008, 0.020)))
        found = findings(folder)
        assert len(found) == 1 and (NOISE in found[0]) == noisy, (k, found)


def test_the_sweeps_noise_counts_how_far_each_repetition_moved(folder):
    # Every size's three repetitions moved 0.80, 1.02 and 1.25: their median ratio, 1.02, says
    # 2%; how far each moved, 20, 2 and 25%, says 20%: a +15% error is within that noise.
    sweep = [row(f"all_reduce/bytes:{1 << (16 + i)}", 1.0, rep=k, reps=3, bare_repeat_ratio=x)
             for i in range(5) for k, x in enumerate((0.80, 1.02, 1.25))]
    write(folder / "predict_sweep.json", doc(sweep, command_line="zb_collectives --progress=thread"))
    write(folder / "zero.json", zero())
    write(folder / "predict.json", predicted({"command_line": f"zb_predict --sweep={folder}/predict_sweep.json"},
                                             dp=(0.0046, 0.004, 0.003, 0.003)))
    found = findings(folder)
    assert len(found) == 1 and "moved 20% between two runs of the same call" in found[0], found


def test_ranks_that_outnumber_the_cores_are_the_reason_given(folder):
    # 4 MPI ranks on a node of 2 cores, z1's exposed time 2.6 ms short: the scheduler's delay,
    # named with the part that came after another rank had finished, even where that part is
    # less than half the shortfall.
    document = zero(z1={"late_finish_wait_s": 0.001})
    write(folder / "zero.json", dict(document, context=dict(document["context"], backend="mpi", num_cpus=2)))
    write(folder / "predict.json", predicted(z1=(0.004, 0.004, 0.0074, 0.010)))
    found = findings(folder)
    assert len(found) == 1, found
    assert "4 CPU ranks shared 2 cores" in found[0] and "scheduler's delay" in found[0], found
    assert "-26.0% (7.40 ms predicted, 10.00 measured; late finish 1.00 ms)" in found[0], found
    assert "the late finish beside a stage is the part of its exposed time that came after" in found[0], found
    # With the exposed time moving twice as far as the collectives': -13.0% in them, beside it.
    # A second stage short for the same reason shares the line, each with its own figures.
    both = zero(z1={"late_finish_wait_s": 0.001}, z2={"late_finish_wait_s": 0.0})
    write(folder / "zero.json", dict(both, context=dict(both["context"], backend="mpi", num_cpus=2)))
    write(folder / "predict.json",
          predicted(counters={"z1": {"exposed_per_comm": 2.0}, "z2": {"exposed_per_comm": 3.0}},
                    z1=(0.004, 0.004, 0.0074, 0.010), z2=(0.004, 0.004, 0.0070, 0.010)))
    found = findings(folder)
    assert len(found) == 1 and "scheduler's delay" in found[0], found
    assert "z1 -26.0% (7.40 ms predicted, 10.00 measured; late finish 1.00 ms; per comm 2.0: collectives -13.0%)" \
        in found[0], found
    assert "z2 -30.0% (7.00 ms predicted, 10.00 measured; late finish 0.00 ms; per comm 3.0: collectives -10.0%)" \
        in found[0], found
    write(folder / "predict.json", predicted(z1=(0.004, 0.004, 0.0074, 0.010)))
    # 4 cores for the 4 ranks, or the ranks on GPUs (nccl): not the reason.
    for backend, cpus in (("mpi", 4), ("nccl", 2)):
        write(folder / "zero.json", dict(document, context=dict(document["context"], backend=backend, num_cpus=cpus)))
        found = findings(folder)
        assert len(found) == 1 and "CPU ranks shared" not in found[0] and "no cause known" in found[0], found
    # A prediction too long is not the scheduler's delay.
    write(folder / "zero.json", dict(document, context=dict(document["context"], backend="mpi", num_cpus=2)))
    write(folder / "predict.json", predicted(z1=(0.004, 0.004, 0.0140, 0.010)))
    found = findings(folder)
    assert len(found) == 1 and "CPU ranks shared" not in found[0], found


def set_counter(document, stage, **counters):
    for b in document["benchmarks"]:
        if b["name"] == ZERO_NAME.format(stage):
            b.update(counters)
    return document


def test_a_host_that_changed_speed_is_the_reason_given_first(folder):
    # z1 also waited for a late rank, but its step ran where the reference collective took 3.2
    # times the sweep's: that comes first, for comm and exposed alike. host_steady 1 (or none,
    # as older results have) leaves the other reasons.
    write(folder / "zero.json", zero(z1={"skew_wait_s": 0.0025, "late_rank": 1}))
    write(folder / "predict.json", set_counter(predicted(z1=(0.0046, 0.004, 0.0074, 0.010)), "z1",
                                               host_steady=0, reference_ratio=3.2))
    found = findings(folder)
    assert len(found) == 2, found
    assert all("did not run at one host speed: the steps' reference collectives took other times" in f
               for f in found), found
    assert all("late rank" not in f for f in found), found
    write(folder / "predict.json", set_counter(predicted(z1=(0.0046, 0.004, 0.0074, 0.010)), "z1",
                                               host_steady=1, reference_ratio=1.1))
    found = findings(folder)
    assert len(found) == 2 and not any("host_steady" in f for f in found), found
    assert any("late rank, rank 1 most often" in f for f in found), found


def test_stages_off_for_one_reason_share_a_line_whatever_their_ratios(folder):
    # dp and z1 ran their steps at 3.2 and 2.5 times the sweep's reference, each with its comm
    # predicted 15% and 20% long: one comm line names both (the host's own line gives the
    # ratios), where two lines, one a stage, would say the same thing twice.
    write(folder / "zero.json", zero())
    document = predicted(dp=(0.0046, 0.004, 0.003, 0.003), z1=(0.0048, 0.004, 0.010, 0.010))
    for stage, ratio in (("dp", 3.2), ("z1", 2.5)):
        set_counter(document, stage, host_steady=0, reference_ratio=ratio)
    write(folder / "predict.json", document)
    found = findings(folder)
    assert len(found) == 1, found
    assert "dp +15.0% (4.60 ms predicted, 4.00 measured), z1 +20.0% (4.80 ms predicted" in found[0], found


def test_a_step_at_another_host_speed_is_listed_even_within_the_bars(folder):
    # dp and z1 predicted within their bars, but their steps ran where the reference collective
    # took 3.2 and 2.5 times the sweep's: one line names both; z3 (host_steady 1) is not in it.
    write(folder / "zero.json", zero())
    document = predicted(dp=(0.00436, 0.004, 0.0022, 0.003), z1=(0.004, 0.004, 0.0076, 0.010),
                         z3=(0.004, 0.004, 0.0076, 0.010))
    for stage, steady, ratio in (("dp", 0, 3.2), ("z1", 0, 2.5), ("z3", 1, 1.0)):
        set_counter(document, stage, host_steady=steady, reference_ratio=ratio)
    write(folder / "predict.json", document)
    r = run_tool("summary.py", folder)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (folder / "summary.md").read_text(encoding="utf-8")
    screen = text.splitlines()[:text.splitlines().index("# Details")]
    host = [line for line in screen if "`host_steady` 0" in line]
    assert len(host) == 1, screen
    assert "dp reference 3.20x, z1 reference 2.50x." in host[0] and " z3 " not in host[0], host
    assert "this run's timings mix two hosts" in host[0], host
    assert findings(folder) == []  # the errors themselves are within their bars
    # Where the sweep's own speed changed (zb_predict's context says so), one line for the file
    # says that instead, whatever each step's ratio.
    write(folder / "predict.json", dict(document, context=dict(
        document["context"], sweep_host_speed="changed: the reference collective 0.487 ms, the median over 98 "
                                              "benchmarks, 41 of them more than 1.5x away")))
    r = run_tool("summary.py", folder)
    text = (folder / "summary.md").read_text(encoding="utf-8")
    screen = text.splitlines()[:text.splitlines().index("# Details")]
    host = [line for line in screen if "`host_steady` 0" in line]
    assert len(host) == 1 and "the host changed speed during the sweep" in host[0], host
    assert "41 of them more than 1.5x away" in host[0] and "reference 3.20x" not in host[0], host


def test_only_the_skew_the_model_did_not_predict_is_the_reason(folder):
    # 2.6 ms short. Of the 2.5 ms measured skew the model predicted 1.5 ms: the 1.0 ms beyond it
    # is less than half the shortfall, so the late rank is not the reason. Predicting 0.2 ms of
    # it, the 2.3 ms beyond is: named with the part predicted.
    write(folder / "zero.json", zero(z1={"skew_wait_s": 0.0025, "late_rank": 1}))
    write(folder / "predict.json", set_counter(predicted(z1=(0.004, 0.004, 0.0074, 0.010)), "z1",
                                               skew_wait_s_predicted=0.0015))
    found = findings(folder)
    assert len(found) == 1 and "late rank" not in found[0] and "no cause known" in found[0], found
    write(folder / "predict.json", set_counter(predicted(z1=(0.004, 0.004, 0.0074, 0.010)), "z1",
                                               skew_wait_s_predicted=0.0002))
    found = findings(folder)
    assert len(found) == 1, found
    assert "(7.40 ms predicted, 10.00 measured; 2.50 ms waiting for a late rank, rank 1 most often; 0.20 ms of " \
        "it predicted)" in found[0], found
    assert "the part predicted from the kernels' `rank_spread` after it" in found[0], found


WARM = "stages that gather come out short"
IN_PLACE = "gathers into its whole weights in place"


def comm_findings(folder, backend, nodes, sweep_flags, **by_stage):
    """The comm_error lines for predict.json rows of `by_stage` (as predicted() takes them), on
    `backend` over `nodes` nodes, from a sweep run with `sweep_flags`."""
    write(folder / "zero.json", zero())
    write(folder / "predict_sweep.json", doc([], command_line=f"zb_collectives --progress=thread {sweep_flags}"))
    context = {"backend": backend, "nodes": nodes,
               "command_line": f"zb_predict --sweep={folder}/predict_sweep.json"}
    write(folder / "predict.json", predicted(context, **by_stage))
    return [f for f in findings(folder) if "`comm_error`" in f]


def named_for(found, reason):
    return {s for s in ("dp", "z1", "z3") for f in found if f" {s} " in f and reason in f}


@pytest.mark.parametrize("backend,nodes,sweep_flags,warm,lines", [
    ("mpi", "1", "", {"z1"}, 2),  # z1 gathers and is short; dp neither gathers nor is, z3 is long
    ("gloo", "1", "--footprint=0", {"z1"}, 2),
    ("nccl", "1", "", set(), 1),  # GPUs: not the CPU caches' bias
    ("mpi", "2", "", set(), 1),  # across nodes the links set the time
    # The sweep already spread its calls (z1 then named for its in-place gathers, a line apart)
    ("mpi", "1", "--footprint=16M", set(), 2),
    ("mpi", "1", "--footprint=0,16M --footprint-ops=all_gather", set(), 2),  # and on one buffer
])
def test_a_short_gathering_stage_on_one_cpu_node_names_the_warm_sweep(folder, backend, nodes,
                                                                       sweep_flags, warm, lines):
    found = comm_findings(folder, backend, nodes, sweep_flags, dp=(0.0046, 0.004, 0.003, 0.003),
                          z1=(0.003, 0.004, 0.003, 0.003), z3=(0.005, 0.004, 0.003, 0.003))
    assert named_for(found, WARM) == warm, found
    assert len(found) == lines, found  # each reason a line of its own


@pytest.mark.parametrize("backend,nodes,sweep_flags,in_place", [
    ("mpi", "1", "--footprint=0,16M", {"z1"}),  # z1 gathers into whole weights and is short; z3's are sharded
    ("gloo", "1", "--footprint=16M", {"z1"}),
    ("nccl", "1", "", set()),  # GPUs: not the CPU caches' bias
    ("mpi", "2", "--footprint=0,16M", set()),  # across nodes the links set the time
    ("mpi", "1", "", set()),  # an unspread sweep: the warm sweep is the reason given
    ("mpi", "1", "--footprint=0,16M,64M", set()),  # two footprints price the gathers at their distance
    ("mpi", "1", "--footprint=0,16M --gather-footprint=32M", set()),  # as the default run sweeps
])
def test_a_short_stage_gathering_in_place_from_one_footprint_names_its_reuse_distance(folder, backend, nodes,
                                                                                      sweep_flags, in_place):
    found = comm_findings(folder, backend, nodes, sweep_flags, dp=(0.0035, 0.004, 0.003, 0.003),
                          z1=(0.003, 0.004, 0.003, 0.003), z3=(0.003, 0.004, 0.003, 0.003))
    assert named_for(found, IN_PLACE) == in_place, found
