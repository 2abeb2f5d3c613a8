"""zb_predict on crafted sweeps: the recorded schedule holds exactly the collectives a real step
issues, an exact alpha-beta sweep gives exactly its sum, extrapolation is flagged, and bad input
exits 2. Every time here is made up, so every expected number is exact."""
import json
import math
import os
import tempfile

import pytest

from zbrun import bad_flag_failures, benchmarks, mpirun, run_json, run_single

MODEL = ["--params=1000003", "--layers=6", "--bucket-mb=0.5"]
ALPHA, BETA = 20e-6, 1e-9  # 20 us + 1 ns per byte, for every op


def sweep_doc(ranks, sizes=None, alpha=ALPHA, beta=BETA, ops=("all_reduce", "reduce_scatter", "all_gather"),
              groups=("world",), handoff=None, wake=None, idle_us=50):
    """A zb_collectives results file of an exact alpha-beta collective, over each group; with
    `handoff`, also serial_s: each collective waited for costs that much more; with `wake`
    too, serial_idle_s: one issued after idle_us of idle costs `wake` more again."""
    sizes = sizes or [1024 * 2 ** k for k in range(15)]  # 1 KiB to 16 MiB
    rows = []
    for op in ops:
        for b in sizes:
            for g in groups:
                name = f"{op}/bytes:{b}/dtype:bf16" + ("" if g == "world" else f"/group:{g}")
                rows.append({"name": name, "run_name": name, "run_type": "iteration", "iterations": 10,
                             "real_time": (alpha + beta * b) * 1e6, "cpu_time": 1.0, "time_unit": "us",
                             "wire_bytes_measured": float("nan")})
                if handoff is not None:
                    rows[-1]["serial_s"] = alpha + beta * b + handoff
                if wake is not None:
                    rows[-1]["serial_idle_s"] = alpha + beta * b + handoff + wake
    cmd = "zb_collectives --timing=per-iter" + (f" --serial --serial-idle-us={idle_us}" if wake is not None else "")
    return {"context": {"world_size": str(ranks), "command_line": cmd}, "benchmarks": rows}


def write(tmp, name, doc):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump(doc, f)  # writes NaN as Google Benchmark does
    return path


def predict(sweep, args, expect_rc=0):
    # No hand-off where the sweep timed none (its default stands in for nccl-tests'), so that
    # an exact sweep's sums stay exact; a --serial sweep's own hand-off is used regardless.
    if not any(a.startswith("--handoff-us=") for a in args):
        args = ["--handoff-us=0", *args]
    data, proc = run_json(1, "zb_predict", [f"--sweep={sweep}", *args], expect_rc=expect_rc)
    return data, proc


def collectives(trace, rank=0):
    """(op, bytes) of the step's collectives in the order they were issued."""
    comm = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == rank and e["tid"] == 1]
    key = "issued_us" if comm and "issued_us" in comm[0]["args"] else "seq"
    return [(e["name"].split()[0], e["args"]["bytes"]) for e in sorted(comm, key=lambda e: e["args"][key])]


@pytest.mark.parametrize("np", [2, 3])
def test_the_recorder_sees_exactly_the_collectives_of_a_real_step(np):
    with tempfile.TemporaryDirectory() as tmp:
        sweep = write(tmp, "sweep.json", sweep_doc(np))
        proc = mpirun(np, "zb_zero", [*MODEL, "--compute=sleep:100", "--iters=2", "--warmup=1", "--no-check",
                                      f"--trace={tmp}/real.json", f"--json={tmp}/real_bench.json"])
        assert proc.returncode == 0, proc.stderr
        with open(f"{tmp}/real_bench.json") as f:
            real = json.load(f)
        pred, _ = predict(sweep, [*MODEL, "--compute=sleep:100", f"--trace={tmp}/pred.json",
                                  f"--measured={tmp}/real_bench.json"])
        for stage in ("dp", "z1", "z2", "z3"):
            with open(f"{tmp}/real_{stage}.json") as f:
                measured = json.load(f)
            with open(f"{tmp}/pred_{stage}.json") as f:
                predicted = json.load(f)
            assert predicted["zerobench"]["collectives"] == measured["zerobench"]["collectives"], stage
            assert collectives(predicted) == collectives(measured), stage
    # Same names as the benchmarks they predict, and the same volume.
    real_rows, pred_rows = benchmarks(real), benchmarks(pred)
    assert set(pred_rows) == set(real_rows)
    for name, b in pred_rows.items():
        assert b["volume_psi_accounted"] == real_rows[name]["volume_psi_accounted"], name
        # Held against the measured step of the same name: its numbers, and the error.
        assert b["comm_s_measured"] == pytest.approx(real_rows[name]["comm_s"], rel=1e-12)
        assert b["comm_error"] == pytest.approx(b["comm_s_predicted"] / b["comm_s_measured"] - 1, rel=1e-9,
                                                abs=1e-12)
        assert b["exposed_error_s"] == pytest.approx(
            b["exposed_comm_s_predicted"] - real_rows[name]["exposed_comm_s"], rel=1e-9, abs=1e-12)
        # The crafted sweep timed no reference collective: whether the host kept its speed is unknown.
        assert real_rows[name]["reference_s"] > 0, name
        assert math.isnan(b["reference_ratio"]) and math.isnan(b["host_steady"]), name


def explained_issues(stdout, stage):
    """The predicted issue times (ms) of --explain's collective rows for `stage`, and its header."""
    block = stdout.split(f"# --explain {stage}\n")[1].split("# wait for collective")[0]
    rows = [line.split("|")[0].split() for line in block.splitlines() if "|" in line and not line.startswith("#")]
    return [float(r[-3]) for r in rows], block.splitlines()[0]


def test_a_trace_of_the_communication_round_is_explained_against_its_own_replay():
    # zb_zero --trace-round=comm draws the round comm_s times, every collective of the step, and
    # says so in the trace; --explain then lines it up against the replay with no compute, whose
    # collectives are all issued within the first few ms, where the whole step's wait out each
    # layer's 0.1 s of compute first. The predicted side is the replay's, so exact.
    with tempfile.TemporaryDirectory() as tmp:
        sweep = write(tmp, "sweep.json", sweep_doc(2))
        said = {}
        for round_ in ("comm", "step"):
            proc = mpirun(2, "zb_zero", [*MODEL, "--stages=dp", "--compute=sleep:100", "--iters=1", "--warmup=0",
                                         "--no-check", f"--trace={tmp}/{round_}.json", f"--trace-round={round_}",
                                         f"--json={tmp}/{round_}_bench.json"])
            assert proc.returncode == 0, proc.stderr
            with open(f"{tmp}/{round_}.json") as f:
                meta = json.load(f)["zerobench"]
            assert meta["round"] == round_ and meta["collectives"]["all_reduce"] > 0, meta
            _, out = predict(sweep, [*MODEL, "--stages=dp", "--compute=sleep:100000", "--explain",
                                     f"--measured={tmp}/{round_}_bench.json"])
            said[round_] = explained_issues(out.stdout, "dp")
    comm_issues, comm_header = said["comm"]
    step_issues, step_header = said["step"]
    assert len(comm_issues) == len(step_issues) == meta["collectives"]["all_reduce"]
    assert "communication alone" in comm_header and "communication alone" not in step_header
    assert max(comm_issues) < 10 and min(step_issues) > 100, (comm_issues, step_issues)


def test_an_exact_alpha_beta_sweep_gives_exactly_its_sum():
    with tempfile.TemporaryDirectory() as tmp:
        sweep = write(tmp, "sweep.json", sweep_doc(2))
        data, _ = predict(sweep, [*MODEL, "--compute=none", "--overlap=off", f"--trace={tmp}/p.json"])
        for name, b in benchmarks(data).items():
            stage = name.split("/")[1].split(":")[1]
            with open(f"{tmp}/p_{stage}.json") as f:
                colls = collectives(json.load(f))
            want = sum(ALPHA + BETA * nbytes for _, nbytes in colls)
            assert b["collectives"] == len(colls) > 0
            assert math.isclose(b["comm_s_predicted"], want, rel_tol=1e-9), (name, b["comm_s_predicted"], want)
            # Serialised with no compute: compute waits for every collective, whole.
            assert math.isclose(b["exposed_comm_s_predicted"], want, rel_tol=1e-9), name
            assert math.isclose(b["step_s_predicted"], want, rel_tol=1e-9), name
            assert b["extrapolated"] == 0


def test_the_results_say_which_exposed_share_required_link_gbps_allowed():
    # The one place a reader of the JSON (tools/predict_accuracy.py) learns the limit.
    with tempfile.TemporaryDirectory() as tmp:
        sweep = write(tmp, "sweep.json", sweep_doc(2))
        data, _ = predict(sweep, [*MODEL, "--compute=sleep:1000", "--stages=dp", "--exposed-limit=0.07"])
    assert float(data["context"]["exposed_limit"]) == 0.07


def test_long_compute_hides_what_the_schedule_lets_it_hide():
    # Each layer's compute (0.1 s) far longer than any collective (< 1 ms). dp reduces each
    # bucket as backward fills it; all hide behind the backward still to run except the last
    # (bucket 0), which the optimizer waits for whole: that one collective is the exposed time.
    with tempfile.TemporaryDirectory() as tmp:
        sweep = write(tmp, "sweep.json", sweep_doc(2))
        on, _ = predict(sweep, [*MODEL, "--compute=sleep:100000", "--overlap=on", f"--trace={tmp}/p.json"])
        off, _ = predict(sweep, [*MODEL, "--compute=sleep:100000", "--overlap=off"])
        with open(f"{tmp}/p_dp.json") as f:
            dp = collectives(json.load(f))
        on_rows, off_rows = benchmarks(on), benchmarks(off)
    for name, b in on_rows.items():
        assert b["compute_s_predicted"] == pytest.approx(6 * 3 * 0.1, rel=1e-12)  # 6 layers, fwd + 2 bwd
        off = off_rows[name.replace("overlap:on", "overlap:off")]
        # Serialised, every collective is exposed; overlapped, strictly less.
        assert math.isclose(off["exposed_comm_s_predicted"], off["comm_s_predicted"], rel_tol=1e-9)
        assert b["exposed_comm_s_predicted"] < off["exposed_comm_s_predicted"], name
        if "/stage:dp/" in name:
            assert math.isclose(b["exposed_comm_s_predicted"], ALPHA + BETA * dp[-1][1], rel_tol=1e-9), name


def test_the_console_says_where_cpu_ranks_outnumber_the_cores():
    # A CPU sweep of 4 ranks on a node of 2 cores: the exposed time's scheduler delay is named
    # as unpriced; with 4 cores, or on devices (no backend said), it is not.
    with tempfile.TemporaryDirectory() as tmp:
        said = {}
        for label, extra in (("2 cores", {"backend": "mpi", "num_cpus": 2}),
                             ("4 cores", {"backend": "mpi", "num_cpus": 4}), ("devices", {})):
            doc = sweep_doc(4)
            doc["context"].update(extra)
            _, proc = predict(write(tmp, "sweep.json", doc), [*MODEL, "--compute=sleep:1000", "--stages=dp"])
            said[label] = "the ranks outnumber the cores" in proc.stdout
    assert said == {"2 cores": True, "4 cores": False, "devices": False}


@pytest.mark.parametrize("times,median", [((1, 10, 1.5), 1.5), ((1.5, 1, 10, 2), 1.5), ((2,), 2)])
def test_each_size_is_priced_at_its_median_repetition(times, median):
    # Repetitions of every size, one of them ten times slower (a stall): the prediction is the
    # exact sum at the median repetition (the lower middle of an even count), as zb_zero's
    # results give the median of theirs; neither the stall nor the fastest run sets it.
    doc = sweep_doc(2)
    rows = []
    for r in doc["benchmarks"]:
        for rep, scale in enumerate(times):
            rows.append(dict(r, repetition_index=rep, repetitions=len(times), real_time=r["real_time"] * scale))
    doc["benchmarks"] = rows
    with tempfile.TemporaryDirectory() as tmp:
        sweep = write(tmp, "sweep.json", doc)
        data, _ = predict(sweep, [*MODEL, "--compute=none", "--overlap=off", "--stages=dp", f"--trace={tmp}/p.json"])
        with open(f"{tmp}/p.json") as f:
            colls = collectives(json.load(f))
    b = next(iter(benchmarks(data).values()))
    want = median * sum(ALPHA + BETA * nbytes for _, nbytes in colls)
    assert math.isclose(b["comm_s_predicted"], want, rel_tol=1e-9), (b["comm_s_predicted"], want)


def test_a_serial_sweep_prices_each_blocking_wait_with_its_hand_off():
    handoff = 30e-6
    with tempfile.TemporaryDirectory() as tmp:
        sweep = write(tmp, "sweep.json", sweep_doc(2, handoff=handoff))
        off, _ = predict(sweep, [*MODEL, "--compute=none", "--overlap=off", f"--trace={tmp}/p.json"])
        on, _ = predict(sweep, [*MODEL, "--compute=none", "--overlap=on"])
        for name, b in benchmarks(off).items():
            stage = name.split("/")[1].split(":")[1]
            with open(f"{tmp}/p_{stage}.json") as f:
                colls = collectives(json.load(f))
            # Serialised, every collective is waited for while it runs: each costs its serial_s.
            want = sum(ALPHA + BETA * nbytes + handoff for _, nbytes in colls)
            assert math.isclose(b["comm_s_predicted"], want, rel_tol=1e-9), (name, b["comm_s_predicted"], want)
            assert math.isclose(b["exposed_comm_s_predicted"], want, rel_tol=1e-9), name
        with open(f"{tmp}/p_dp.json") as f:
            dp = collectives(json.load(f))
    # dp overlapped: its reductions run back to back and only the optimizer waits, one hand-off.
    b = next(b for name, b in benchmarks(on).items() if "/stage:dp/" in name)
    want = sum(ALPHA + BETA * nbytes for _, nbytes in dp) + handoff
    assert math.isclose(b["comm_s_predicted"], want, rel_tol=1e-9), (b["comm_s_predicted"], want)


def test_a_collective_issued_after_idle_pays_the_sweeps_wake_up_and_one_queued_does_not():
    handoff, wake = 20e-6, 35e-6
    with tempfile.TemporaryDirectory() as tmp:
        plain = write(tmp, "plain.json", sweep_doc(2, handoff=handoff))
        woken = write(tmp, "woken.json", sweep_doc(2, handoff=handoff, wake=wake))
        args = [*MODEL, "--stages=dp", "--compute=sleep:200", "--overlap=off"]
        before, _ = predict(plain, [*args, f"--trace={tmp}/p.json"])
        after, proc = predict(woken, args)
        with open(f"{tmp}/p.json") as f:  # one stage: the trace is the file named
            n = len(collectives(json.load(f)))
    b0, b1 = next(iter(benchmarks(before).values())), next(iter(benchmarks(after).values()))
    # Serialised dp: each all-reduce is issued after 200 us of backward with the stream idle
    # since the last one was waited for, so each starts `wake` late, and the step is n wakes
    # longer. Its communication alone issues each one a hand-off (20 us) after the last: less
    # idle than the 50 us the sweep woke after, so it is unchanged.
    assert n > 1
    assert math.isclose(b1["step_s_predicted"] - b0["step_s_predicted"], n * wake, rel_tol=1e-6)
    assert b1["comm_s_predicted"] == b0["comm_s_predicted"]
    assert "serial_idle_s for waking after 50 us idle" in proc.stdout


def test_sizes_beyond_the_sweep_are_flagged():
    with tempfile.TemporaryDirectory() as tmp:
        small = write(tmp, "small.json", sweep_doc(2, sizes=[256, 512, 1024]))
        data, _ = predict(small, MODEL)
        assert all(b["extrapolated"] == 1 for b in benchmarks(data).values())


BAD = [["--params=1e6"],                            # no --sweep
       ["--sweep=/no/such.json"],
       ["--sweep=SWEEP", "--compute=gemm:64"],
       ["--sweep=SWEEP", "--stages=z9"],
       ["--sweep=SWEEP", "--trace=/no/such/dir/t.json"],
       ["--sweep=SWEEP", "--measured=/no/such.json"],
       ["--sweep=SWEEP", "--microbatches=2,x"],
       # The pipeline has no z3 (PIPE's flags).
       ["--sweep=SWEEP", "--params=1000003", "--layers=8", "--pp=2", "--chunks=2", "--microbatches=2,4",
        "--stages=z3"]]


def test_bad_input_exits_2_with_one_line_before_mpi():
    with tempfile.TemporaryDirectory() as tmp:
        sweep = write(tmp, "sweep.json", sweep_doc(2))
        assert not bad_flag_failures("zb_predict", [[a.replace("SWEEP", sweep) for a in args] for args in BAD])


def test_a_sweep_without_the_needed_op_prices_it_from_the_link_or_fails_naming_it():
    with tempfile.TemporaryDirectory() as tmp:
        sweep = write(tmp, "sweep.json", sweep_doc(2, ops=("all_reduce",)))
        # Within the node: the reduce-scatter from the link the all-reduces were fitted to.
        data, _ = predict(sweep, [*MODEL, "--stages=z1"])
        assert [b["modelled"] for b in benchmarks(data).values()] == [1]
        # Across nodes, where nothing was swept: refused, naming the op and the tier.
        proc = run_single("zb_predict", [f"--sweep={sweep}", *MODEL, "--stages=z1", "--ranks-per-node=1"])
        assert proc.returncode != 0
        assert "reduce_scatter" in proc.stderr and "inter-node" in proc.stderr


PIPE = ["--params=1000003", "--layers=8", "--pp=2", "--chunks=2", "--microbatches=2,4"]


def test_the_recorder_sees_exactly_the_collectives_of_a_real_pipeline_step():
    # zb_pipeline's own step, recorded: the same collectives in the same order, the same
    # volume, for every strategy and M, under the names zb_pipeline gives them.
    with tempfile.TemporaryDirectory() as tmp:
        sweep = write(tmp, "sweep.json", sweep_doc(2))
        for m in (2, 4):
            proc = mpirun(2, "zb_pipeline", [*PIPE[:-1], f"--microbatches={m}", "--compute=sleep:100",
                                             "--iters=1", "--warmup=0", "--no-check", "--no-split",
                                             f"--trace={tmp}/real_m{m}.json"])
            assert proc.returncode == 0, proc.stderr
        proc = mpirun(2, "zb_pipeline", [*PIPE, "--compute=sleep:100", "--iters=1", "--warmup=0", "--no-check",
                                         "--no-split", f"--json={tmp}/real.json"])
        assert proc.returncode == 0, proc.stderr
        pred, _ = predict(sweep, [*PIPE, "--compute=sleep:100", "--stages=dp,z1,z2", f"--trace={tmp}/pred.json",
                                  f"--measured={tmp}/real.json"])
        for m in (2, 4):
            for stage in ("dp", "z1", "z2"):
                with open(f"{tmp}/real_m{m}_{stage}.json") as f:
                    measured = json.load(f)
                with open(f"{tmp}/pred_{stage}_m{m}.json") as f:
                    predicted = json.load(f)
                assert collectives(predicted) == collectives(measured), (stage, m)
        with open(f"{tmp}/real.json") as f:
            real_rows = benchmarks(json.load(f))
    pred_rows = benchmarks(pred)
    assert set(pred_rows) == set(real_rows) and len(pred_rows) == 6
    for name, b in pred_rows.items():
        assert b["volume_psi_accounted"] == real_rows[name]["volume_psi_accounted"], name
        assert b["params"] == real_rows[name]["params"], name
        # The schedule's idle slots are compute-engine time in the replay too.
        assert b["compute_s_predicted"] > 0


def test_node_aware_stages_are_recorded_as_a_real_run_issues_them_over_their_groups():
    # 4 ranks as 2 declared nodes of 2: hsdp and hpz issue collectives over the node and
    # cross-node groups; the recorded ones are the real ones, and each is priced from its
    # group's sweep (a sweep without that group is refused, naming it).
    with tempfile.TemporaryDirectory() as tmp:
        doc = sweep_doc(4, groups=("world", "node", "cross"))
        doc["context"]["nodes"] = "2"  # as zb_collectives writes it across 2 nodes of 2
        sweep = write(tmp, "sweep.json", doc)
        args = [*MODEL, "--stages=hsdp,hpz", "--ranks-per-node=2"]
        proc = mpirun(4, "zb_zero", [*args, "--iters=1", "--warmup=0", "--no-check", f"--trace={tmp}/real.json"])
        assert proc.returncode == 0, proc.stderr
        pred, _ = predict(sweep, [*args, f"--trace={tmp}/pred.json"])
        for stage in ("hsdp", "hpz"):
            with open(f"{tmp}/real_{stage}.json") as f:
                measured = json.load(f)
            with open(f"{tmp}/pred_{stage}.json") as f:
                predicted = json.load(f)
            assert collectives(predicted) == collectives(measured), stage
        assert all(b["extrapolated"] == 0 for b in benchmarks(pred).values())
        world_only = write(tmp, "world.json", sweep_doc(4))
        proc = run_single("zb_predict", [f"--sweep={world_only}", *args])
        assert proc.returncode != 0 and "group" in proc.stderr


def test_a_nodes_one_link_doubles_exactly_its_two_ranks_cross_node_collectives():
    # Swept on 2 nodes of 1 (the cross group had the link to itself) and on a node of 2;
    # predicted at 2 nodes of 2 with one link a node (--node-links=1): each of hsdp's
    # all-reduces over the cross groups takes twice its swept time, so the step grows by
    # exactly their sum, and dp, whose world ring shares nothing, not at all.
    with tempfile.TemporaryDirectory() as tmp:
        doc = sweep_doc(2, groups=("world", "cross"))
        doc["context"]["nodes"] = "2"
        inter = write(tmp, "inter.json", doc)
        intra = write(tmp, "intra.json", sweep_doc(2))
        args = [*MODEL, "--stages=dp,hsdp", "--ranks=4", "--ranks-per-node=2"]
        comm = {}
        for links in (0, 1):
            data, _ = predict(f"{inter},{intra}", [*args, f"--node-links={links}", f"--trace={tmp}/p{links}.json"])
            comm[links] = {n.split("stage:")[1].split("/")[0]: b["comm_s_predicted"]
                           for n, b in benchmarks(data).items()}
        with open(f"{tmp}/p0_hsdp.json") as f:
            trace = json.load(f)
        cross = [e["args"]["bytes"] for e in trace["traceEvents"]
                 if e["ph"] == "X" and e["pid"] == 0 and e["tid"] == 1 and e["name"].endswith(" over cross")]
        assert cross, "hsdp issued no collective over the cross groups"
        shared = sum(ALPHA + BETA * b for b in cross)
        assert comm[1]["hsdp"] - comm[0]["hsdp"] == pytest.approx(shared, rel=1e-9)
        assert comm[1]["dp"] == comm[0]["dp"]
