"""zb_pipeline at 2, 3 and 4 ranks: every strategy ends on the reference's weights with M not a
multiple of N and unequal chunks; volumes are 2, 2 and M + 1 by accounting and at the sockets;
memory and gradient memory match the formulas, z2's whatever M is; and the trace shows each
reduction issued between backward chunks, never by reading a clock."""
import json
import os
import subprocess
import tempfile

import pytest

from zbrun import TCP_RING, bad_flag_failures, benchmarks, binary, drawn_and_candidates, is_nan, run_json

STRATEGIES = ["dp", "z1", "z2"]


def rows(data):
    """{(strategy, M): benchmark}."""
    out = {}
    for name, b in benchmarks(data).items():
        parts = dict(p.split(":", 1) for p in name.split("/")[1:] if ":" in p)
        out[(parts["stage"], int(parts["microbatches"]))] = b
    return out


def volume(strategy, m):
    return m + 1 if strategy == "z2" else 2


# (ranks, flags, M values): M never a multiple of N; chunks of unequal sizes (7 layers in 3
# chunks; a GPT's embedding and head beside its blocks); buckets small enough to split chunks.
CHECKED = [
    (2, ["--params=100003", "--layers=7", "--chunks=3", "--pp=1", "--optimizer=momentum",
         "--grad-dtype=fp32"], [3]),
    (3, ["--model=gpt:layers=4,hidden=63,vocab=997", "--chunks=2", "--pp=2", "--pp-rank=1",
         "--bucket-mb=0.02"], [4]),
    (4, ["--params=200009", "--layers=12", "--chunks=2", "--pp=3", "--pp-rank=1", "--bucket-mb=0.05"], [3, 6]),
]


@pytest.mark.parametrize("np,flags,ms", CHECKED, ids=lambda v: str(v) if isinstance(v, int) else None)
def test_every_strategy_matches_the_reference(np, flags, ms):
    data, proc = run_json(np, "zb_pipeline", [*flags, "--microbatches=" + ",".join(map(str, ms)),
                                             "--iters=2", "--warmup=1", "--no-split"])
    got = rows(data)
    assert set(got) == {(s, m) for s in STRATEGIES for m in ms}, proc.stdout
    for (strategy, m), b in got.items():
        assert m % np != 0
        assert b["wrong"] == 0, (strategy, m, proc.stdout)
        assert b["ranks"] == np and b["microbatches"] == m
        assert b["volume_psi_formula"] == volume(strategy, m)
        # Exact up to the padding that makes the N blocks of every bucket equal, reported.
        pad = b["padding"] / b["params"]
        assert volume(strategy, m) <= b["volume_psi_accounted"] <= volume(strategy, m) * (1 + pad) + 1e-12
        # Buckets are the same for every strategy: one reduction each (dp, z1) or one per
        # micro-batch (z2), and one gather each (z1, z2).
        units = got[("dp", m)]["collectives"]
        assert b["collectives"] == {"dp": units, "z1": 2 * units, "z2": (m + 1) * units}[strategy]
    assert "# zb_pipeline" in proc.stdout and "grad bytes/param formula" in proc.stdout


def test_volume_is_exact_when_the_buckets_divide():
    data, _ = run_json(2, "zb_pipeline", ["--params=400000", "--layers=8", "--bucket-mb=0.1",
                                          "--microbatches=2,4", "--iters=1", "--warmup=0", "--no-check",
                                          "--no-split"])
    for (strategy, m), b in rows(data).items():
        assert b["padding"] == 0
        assert b["volume_psi_accounted"] == volume(strategy, m), (strategy, m)


def test_measured_volume_over_tcp_ring_is_2_2_and_m_plus_1():
    data, proc = run_json(4, "zb_pipeline", ["--params=2e6", "--layers=8", "--microbatches=2,4",
                                             "--iters=1", "--warmup=0", "--no-check", "--no-split"],
                       mca=TCP_RING)
    for (strategy, m), b in rows(data).items():
        assert not is_nan(b["volume_psi_measured"]), proc.stdout
        assert b["volume_psi_measured"] == pytest.approx(volume(strategy, m), rel=0.01), (strategy, m)


@pytest.mark.parametrize("np,optimizer,grad", [(2, "adam", "bf16"), (4, "momentum", "fp32")])
def test_memory_matches_the_formula_and_z2_gradients_do_not_grow_with_m(np, optimizer, grad):
    data, proc = run_json(np, "zb_pipeline", ["--params=4e6", "--layers=16", "--bucket-mb=0.25",
                                              f"--optimizer={optimizer}", f"--grad-dtype={grad}",
                                              "--microbatches=2,8", "--iters=1", "--warmup=0",
                                              "--no-check", "--no-split"])
    w, g, o = 2, 2 if grad == "bf16" else 4, 12 if optimizer == "adam" else 8
    formula = {"dp": w + g + o, "z1": w + g + o / np, "z2": w + (g + o) / np}
    got = rows(data)
    for (strategy, m), b in got.items():
        assert b["bytes_per_param_formula"] == pytest.approx(formula[strategy], rel=1e-12)
        assert b["bytes_per_param_measured"] == pytest.approx(formula[strategy], rel=0.01), \
            (strategy, m, proc.stdout)
        assert b["grad_bytes_per_param_measured"] == pytest.approx(b["grad_bytes_per_param_formula"], rel=0.01)
        assert (b["transient_peak_bytes"] > 0) == (strategy == "z2")
    for strategy in STRATEGIES:
        few, many = got[(strategy, 2)], got[(strategy, 8)]
        assert few["grad_bytes_per_param_formula"] == many["grad_bytes_per_param_formula"]
        assert many["grad_bytes_per_param_measured"] == pytest.approx(few["grad_bytes_per_param_measured"],
                                                                      rel=0.01)
    # z2 keeps g/N and two bucket-sized slots: less than the full buffer dp and z1 keep.
    assert got[("z2", 8)]["grad_bytes_per_param_formula"] < g == got[("z1", 8)]["grad_bytes_per_param_formula"]
    # zb_plan sizes the slots from the bucket the same way. It knows neither layers nor padding,
    # so it is given the bucket the benchmark's 0.25 MiB became: one whole layer, 4e6 / 16
    # parameters, on this pipeline rank's 2e6 (the default pp=2, chunks=2).
    layer_mb = 4e6 / 16 * g / 1048576
    with tempfile.TemporaryDirectory() as tmp:
        plan = os.path.join(tmp, "plan.json")
        res = subprocess.run([binary("zb_plan"), "--params=4e6", f"--dp={np}", "--pp=2", "--chunks=2",
                              "--microbatches=8", f"--bucket-mb={layer_mb!r}", f"--optimizer={optimizer}",
                              f"--grad-dtype={grad}",
                              "--stages=dp,z1,z2", f"--json={plan}"], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        with open(plan) as f:
            planned = {r["stage"]: r for r in json.load(f)["pipeline"]}
    for strategy in STRATEGIES:
        r = planned[strategy]
        assert r["grads_bytes"] / r["params_per_gpu"] == pytest.approx(
            got[(strategy, 8)]["grad_bytes_per_param_formula"], rel=0.01), strategy


def spans(trace, rank, tid):
    return sorted((e for e in trace["traceEvents"]
                   if e["ph"] == "X" and e["pid"] == rank and e["tid"] == tid), key=lambda e: e["ts"])


def end(e):
    return e["ts"] + e["dur"]


@pytest.fixture(scope="module")
def traces():
    """One traced step of each strategy: 2 ranks, M = 3, 2 chunks of one bucket, P = 2."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        run_json(2, "zb_pipeline", ["--params=400000", "--layers=8", "--chunks=2", "--pp=1",
                                    "--microbatches=3", "--compute=sleep:200", "--iters=1",
                                    "--warmup=1", "--no-check", "--no-split", f"--trace={path}"],
                 mca=["--bind-to", "none"])
        out = {}
        for strategy in STRATEGIES:
            with open(os.path.join(tmp, f"trace_{strategy}.json")) as f:
                out[strategy] = json.load(f)
    return out


def test_trace_holds_every_collective(traces):
    for strategy, trace in traces.items():
        meta = trace["zerobench"]
        assert meta["stage"] == strategy and meta["microbatches"] == 3 and meta["chunks"] == 2
        want = {"dp": (2, 0, 0), "z1": (0, 2, 2), "z2": (0, 6, 2)}[strategy]
        assert tuple(meta["collectives"][op] for op in ("all_reduce", "reduce_scatter", "all_gather")) == want
        for rank in (0, 1):
            comm = spans(trace, rank, 1)
            for op, count in meta["collectives"].items():
                assert sum(e["name"].startswith(op + " ") for e in comm) == count, (strategy, op)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_reduction_is_issued_between_backward_chunks(traces, strategy):
    # z2 reduces a chunk after every micro-batch's backward of it, dp and z1 after its last
    # one; each is issued after that backward ends and before the next compute starts.
    trace = traces[strategy]
    for rank in (0, 1):
        compute = spans(trace, rank, 0)
        reductions = [e for e in spans(trace, rank, 1) if e["name"].split()[0] in ("all_reduce", "reduce_scatter")]
        seen = sorted((e["args"]["chunk"], e["args"]["microbatch"]) for e in reductions)
        mbs = range(3) if strategy == "z2" else [2]
        assert seen == sorted((c, m) for c in range(2) for m in mbs), (strategy, rank)
        for r in reductions:
            c, m, issued = r["args"]["chunk"], r["args"]["microbatch"], r["args"]["issued_us"]
            i = next(k for k, e in enumerate(compute) if e["name"] == f"backward c{c} mb{m} u{c}")
            assert issued >= end(compute[i]), (strategy, rank, c, m)
            if i + 1 < len(compute):
                assert issued <= compute[i + 1]["ts"], (strategy, rank, c, m, compute[i + 1]["name"])


def test_the_step_drawn_is_the_median_of_its_candidates(traces):
    # As zb_zero's: of three steps run back to back, the one whose slowest rank's exposed time is
    # their median; the ranks' exposed_us are its own.
    for strategy, trace in traces.items():
        drawn, tried = drawn_and_candidates(trace)
        assert len(tried) == 3, (strategy, tried)
        assert drawn == pytest.approx(sorted(tried)[1], abs=0.002), (strategy, drawn, tried)


def test_waits_add_up_to_the_exposed_time_and_the_tail_is_part_of_it(traces):
    for strategy, trace in traces.items():
        for rank in (0, 1):
            proc = next(e for e in trace["traceEvents"]
                        if e["ph"] == "M" and e["name"] == "process_name" and e["pid"] == rank)
            waits = spans(trace, rank, 2)
            assert waits, (strategy, rank)  # the optimizer waits for the last reduction at least
            total = sum(w["dur"] for w in waits)
            assert total == pytest.approx(proc["args"]["exposed_us"], abs=1e-3 * (len(waits) + 1))
            assert 0 <= proc["args"]["tail_us"] <= proc["args"]["exposed_us"] + 1e-3


def test_a_corrupted_gradient_fails_the_check():
    data, proc = run_json(2, "zb_pipeline", ["--params=10000", "--layers=4", "--iters=2", "--warmup=0",
                                             "--no-split", "--fault-corrupt=1"], expect_rc=1)
    for key, b in rows(data).items():
        assert b["wrong"] >= 1, key
    assert "differ from the reference" in proc.stderr


def test_one_rank_moves_nothing():
    data, _ = run_json(1, "zb_pipeline", ["--params=1000", "--layers=4", "--iters=1", "--warmup=0"])
    for key, b in rows(data).items():
        assert b["wrong"] == 0 and is_nan(b["volume_psi_measured"]), key


BAD = [(["--stages=z3"], "--stages"), ["--microbatches=0"], ["--microbatches=3"], ["--microbatches=2,x"],
       ["--pp=2", "--pp-rank=2"], ["--chunks=0"], (["--layers=3"], "fewer than --pp x --chunks"),
       ["--compute=nap:1"], ["--trace=/no/such/dir/t.json"], (["--strategies=dp"], "unknown flag --strategies")]


def test_bad_flags_exit_2_with_one_line_before_mpi():
    assert not bad_flag_failures("zb_pipeline", BAD)
