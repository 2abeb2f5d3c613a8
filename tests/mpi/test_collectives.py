"""zb_collectives at 2, 3 and 4 ranks: correctness, counters, measured wire bytes, faults, for
every op including the all-to-all, which runs only when asked for."""

import os
import subprocess

import pytest

from zbrun import ENV, TCP_RING, bad_flag_failures, benchmarks, is_nan, mpirun, run_json, run_single

COUNTERS = ["ranks", "bytes", "algbw_GBps", "busbw_GBps", "wrong", "wire_bytes_formula",
            "wire_bytes_measured"]
OPS = ["all_reduce", "reduce_scatter", "all_gather"]  # the default --ops
ALL_OPS = [*OPS, "all_to_all"]
EVERY_OP = "--ops=" + ",".join(ALL_OPS)


@pytest.mark.parametrize("np", [2, 3, 4])
@pytest.mark.parametrize("dtype,elem", [("bf16", 2), ("fp32", 4)])
def test_every_op_correct_at_odd_counts(np, dtype, elem):
    # 1001 elements: odd, and divisible by none of 2, 3, 4; 7 elements: smaller than a
    # ring's step count per rank at 4 ranks after padding.
    for count in (7, 1001):
        data, proc = run_json(np, "zb_collectives",
                              [f"--min-bytes={count * elem}", f"--max-bytes={count * elem}",
                               f"--dtype={dtype}", "--iters=2", "--warmup=1", EVERY_OP])
        runs = benchmarks(data)
        assert len(runs) == 4, proc.stdout
        for name, b in runs.items():
            op = name.split("/")[0]
            assert b["wrong"] == 0, name
            assert b["ranks"] == np
            padded = count if op == "all_reduce" else -(-count // np) * np
            assert b["bytes"] == padded * elem, name
            assert name == f"{op}/bytes:{padded * elem}/dtype:{dtype}"
            for c in COUNTERS:
                assert c in b, (name, c)
        assert data["context"]["world_size"] == str(np)
        assert data["context"]["backend"] == "mpi"


def test_json_counters_and_busbw_factors():
    data, _ = run_json(3, "zb_collectives", ["--min-bytes=64K", "--max-bytes=256K",
                                            "--step-factor=4", "--iters=2", "--warmup=0", EVERY_OP])
    runs = benchmarks(data)
    assert len(runs) == 8
    for name, b in runs.items():
        op = name.split("/")[0]
        factor = 2 * 2 / 3 if op == "all_reduce" else 2 / 3
        assert b["busbw_GBps"] == pytest.approx(b["algbw_GBps"] * factor, rel=1e-9)
        assert b["wire_bytes_formula"] == pytest.approx(b["bytes"] * factor, rel=1e-12)
        # Shared memory moves the data here: nothing on a socket to measure.
        assert is_nan(b["wire_bytes_measured"])
        for key in ("library", "mpi_library", "host", "cpu_model", "git_revision"):
            assert data["context"].get(key), key
    # The revision the binary was built from, taken at build time, not when it was configured:
    # this checkout's HEAD (ctest runs right after the build), "-dirty" if it had changes.
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.abspath(__file__)))
    if head.returncode == 0:
        assert data["context"]["git_revision"].removesuffix("-dirty") == head.stdout.strip()


def test_mpi_yields_where_a_ranks_two_threads_share_its_cores():
    """Open MPI polls for its peers without yielding unless its job has more ranks than slots,
    so a rank's communication thread would hold the core its compute shares. Bound to a core
    each with the collectives on the communication thread, the ranks ask for the yield before
    MPI starts and MPI's own tool interface reports it on; on the calling thread alone they
    keep the library's polling; a launch's own setting stands, and is reported as the launch's."""
    args = ["--min-bytes=4K", "--max-bytes=4K", "--iters=1", "--warmup=0"]
    unset = {k: v for k, v in ENV.items() if k != "OMPI_MCA_mpi_yield_when_idle"}
    bound = ["--bind-to", "core"]
    data, _ = run_json(2, "zb_collectives", [*args, "--progress=thread"], mca=bound, env=unset)
    assert data["context"]["mpi_yield_when_idle"] == (
        "on (asked for: a rank's compute and communication threads share its cores)")
    data, _ = run_json(2, "zb_collectives", [*args, "--progress=caller"], mca=bound, env=unset)
    assert data["context"]["mpi_yield_when_idle"] == (
        "off (library default: the collectives run on the calling thread)")
    data, _ = run_json(2, "zb_collectives", [*args, "--progress=thread"],
                       mca=[*bound, "--mca", "mpi_yield_when_idle", "0"])
    assert data["context"]["mpi_yield_when_idle"] == "off (the launch's OMPI_MCA_mpi_yield_when_idle=0)"


# Open MPI's pairwise all-to-all: each rank sends each other rank its block, nothing more. (Its
# Bruck algorithm, for small blocks, relays blocks and sends more.)
PAIRWISE = ["--mca", "coll_tuned_alltoall_algorithm", "2"]


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_measured_wire_bytes_match_ring_ideal_over_tcp(dtype):
    data, proc = run_json(4, "zb_collectives",
                          ["--min-bytes=4M", "--max-bytes=8M", "--iters=2", "--warmup=1",
                           f"--dtype={dtype}", EVERY_OP], mca=TCP_RING + PAIRWISE)
    runs = benchmarks(data)
    assert {n.split("/")[0] for n in runs} == set(ALL_OPS)
    for name, b in runs.items():
        assert b["bytes"] >= 4 << 20
        assert not is_nan(b["wire_bytes_measured"]), name
        ratio = b["wire_bytes_measured"] / b["wire_bytes_formula"]
        assert abs(ratio - 1) < 0.02, (name, ratio)
        assert b["wrong"] == 0


def test_skipped_collective_times_out_naming_the_op():
    # A hang would end in mpirun's own timeout, which fails the test as an error. Calls 0 and 1
    # prime the one buffer (primed_calls), 2 is the warm-up of the untimed run --bare puts
    # first, 3 to 5 that run's batch: rank 1 skips the batch's middle call, so the others wait
    # in an all-gather well before rank 1 waits anywhere (skipping the warm-up, it would reach
    # the barrier that follows as they start waiting, and which timed out first was a race).
    proc = mpirun(3, "zb_collectives", ["--ops=all_gather", "--min-bytes=64K", "--max-bytes=64K",
                                        "--iters=3", "--warmup=1", "--timeout=2", "--bare",
                                        "--fault-skip=1:4"], timeout=120)
    assert proc.returncode != 0
    lines = [l for l in proc.stderr.splitlines() if "zb_collectives: error: timeout" in l]
    assert lines, proc.stderr
    # 32768 elements padded to 32769 so 3 ranks hold equal blocks.
    assert "all_gather of 65538 bytes (bf16)" in lines[0]
    assert "rank " in lines[0]


def test_corrupted_input_is_counted_wrong_and_fails():
    data, proc = run_json(2, "zb_collectives", ["--ops=all_reduce", "--min-bytes=4K",
                                               "--max-bytes=4K", "--iters=2",
                                               "--fault-corrupt=1"], expect_rc=1)
    b = benchmarks(data)["all_reduce/bytes:4096/dtype:bf16"]
    assert b["wrong"] >= 1
    assert "wrong" in proc.stderr


def test_a_footprint_spreads_the_calls_and_every_element_is_still_checked():
    # 1 MiB of buffers: 64 copies of a 4 KiB all-reduce's input and output, each call the next.
    ops = "--ops=all_reduce,reduce_scatter,all_gather,all_to_all"
    data, proc = run_json(3, "zb_collectives", [ops, "--min-bytes=4K", "--max-bytes=16K", "--step-factor=4",
                                               "--iters=5", "--footprint=1M"])
    runs = benchmarks(data)
    assert len(runs) == 8 and all(b["wrong"] == 0 for b in runs.values()), proc.stdout
    # The check reads the first slot's output, computed from the first slot's input: a corrupted
    # input, copied into every slot, is still counted.
    data, proc = run_json(2, "zb_collectives", ["--ops=all_reduce", "--min-bytes=4K", "--max-bytes=4K",
                                               "--iters=2", "--footprint=1M", "--fault-corrupt=1"], expect_rc=1)
    assert benchmarks(data)["all_reduce/bytes:4096/dtype:bf16/footprint:1048576"]["wrong"] >= 1


def test_a_footprint_is_written_before_the_timed_calls_meet_it():
    # 256 KiB calls spread over 32 MiB: 64 to 128 slots, so the 21 calls the counters watch all
    # meet slots the 21 untimed calls before them did not. A slot never written costs a page
    # fault for each of its 4 KiB pages there: 64 a call in place, 32 for an in-place gather
    # (its own half written as input); out of place the inputs' slots and the one output buffer
    # they all reuse must be written as well. Written first, the calls meet none of
    # their own. Open MPI's temporary buffers may still grow the heap once (33 faults in the
    # first benchmark at 4 calls where the JSON's path was long): under 2 a call over 21.
    data, proc = run_json(2, "zb_collectives", ["--placement=out,in", "--min-bytes=256K", "--max-bytes=256K",
                                               "--iters=20", "--warmup=1", "--footprint=32M"])
    runs = benchmarks(data)
    assert len(runs) == 6, proc.stdout
    faults = {name: b["page_faults"] for name, b in runs.items()}
    assert all(f < 8 for f in faults.values()), faults


def test_footprint_ops_spread_only_the_ops_named():
    # 4 KiB out of place at 2 ranks: on one buffer the input and the output, 8 KiB for the
    # all-reduce, 6 KiB for the others (one side the rank's half); spread, the gather's 2 KiB
    # inputs fill 1 MiB in 512 slots, beside the one 4 KiB output every call reuses.
    data, proc = run_json(2, "zb_collectives", ["--min-bytes=4K", "--max-bytes=4K", "--iters=2",
                                               "--footprint=1M", "--footprint-ops=all_gather"])
    spread = {name: b["footprint_bytes"] for name, b in benchmarks(data).items()}
    assert spread == {"all_reduce/bytes:4096/dtype:bf16": 8192, "reduce_scatter/bytes:4096/dtype:bf16": 6144,
                      "all_gather/bytes:4096/dtype:bf16/footprint:1048576": 512 * 2048 + 4096}, proc.stdout
    # A list times the ops it spreads at each size, one buffer (0) named as before; the others once.
    data, proc = run_json(2, "zb_collectives", ["--min-bytes=4K", "--max-bytes=4K", "--iters=2",
                                               "--footprint=0,1M", "--footprint-ops=all_gather"])
    spread = {name: b["footprint_bytes"] for name, b in benchmarks(data).items()}
    assert spread == {"all_reduce/bytes:4096/dtype:bf16": 8192, "reduce_scatter/bytes:4096/dtype:bf16": 6144,
                      "all_gather/bytes:4096/dtype:bf16": 6144,
                      "all_gather/bytes:4096/dtype:bf16/footprint:1048576": 512 * 2048 + 4096}, proc.stdout
    assert "all_gather spread" in proc.stdout
    # --gather-footprint adds a footprint to the all-gathers alone.
    data, proc = run_json(2, "zb_collectives", ["--min-bytes=4K", "--max-bytes=4K", "--iters=2",
                                               "--ops=all_gather,reduce_scatter", "--placement=out,in",
                                               "--footprint=0,1M", "--gather-footprint=2M"])
    assert sorted(benchmarks(data)) == sorted(
        op + "/bytes:4096/dtype:bf16" + placed + footprint
        for op, placed, footprints in (
            ("all_gather", "", ("", "/footprint:1048576", "/footprint:2097152")),
            ("all_gather", "/placement:in", ("", "/footprint:1048576", "/footprint:2097152")),
            ("reduce_scatter", "", ("", "/footprint:1048576")),
            ("reduce_scatter", "/placement:in", ("", "/footprint:1048576")))
        for footprint in footprints), proc.stdout


def test_every_slot_is_used_twice_before_the_timed_calls():
    # The kernel marks a page read by another process in use over its first two reads; a sweep
    # that timed its fresh slots there would price a cost no step's buffers pay. 4 KiB out of
    # place at 2 ranks, the gather spread over 1 MiB: 512 slots, 1024 untimed calls; one buffer: 2.
    data, proc = run_json(2, "zb_collectives", ["--min-bytes=4K", "--max-bytes=4K", "--iters=2",
                                               "--footprint=0,1M", "--footprint-ops=all_gather"])
    primed = {name: b["primed_calls"] for name, b in benchmarks(data).items()}
    assert primed == {"all_reduce/bytes:4096/dtype:bf16": 2, "reduce_scatter/bytes:4096/dtype:bf16": 2,
                      "all_gather/bytes:4096/dtype:bf16": 2,
                      "all_gather/bytes:4096/dtype:bf16/footprint:1048576": 1024}, proc.stdout


@pytest.mark.parametrize("np", [2, 3])
def test_in_place_collectives_are_correct_and_named_apart(np):
    # 1001 elements, odd, over a footprint of several slots: each op's in-place form (the
    # reduce-scatter's output and the all-gather's input the rank's block of one buffer) beside
    # its usual one; the all-to-all has no in-place form and runs once.
    data, proc = run_json(np, "zb_collectives", [EVERY_OP, "--placement=out,in", "--min-bytes=2002",
                                                "--max-bytes=2002", "--iters=3", "--footprint=64K"])
    runs = benchmarks(data)
    padded = {op: 1001 if op == "all_reduce" else -(-1001 // np) * np for op in ALL_OPS}
    want = {f"{op}/bytes:{padded[op] * 2}/dtype:bf16/footprint:65536" for op in ALL_OPS}
    want |= {f"{op}/bytes:{padded[op] * 2}/dtype:bf16/placement:in/footprint:65536" for op in OPS}
    assert set(runs) == want, proc.stdout
    assert all(b["wrong"] == 0 for b in runs.values()), proc.stdout
    assert "all_gather in place" in proc.stdout


@pytest.mark.parametrize("op", OPS)
def test_an_in_place_collective_counts_a_corrupted_input(op):
    # The check lays the input down again over the timed calls' results, so a corrupted input
    # still shows, in place as out of place.
    data, proc = run_json(2, "zb_collectives", [f"--ops={op}", "--placement=in", "--min-bytes=4K",
                                               "--max-bytes=4K", "--iters=2", "--fault-corrupt=1"], expect_rc=1)
    assert benchmarks(data)[f"{op}/bytes:4096/dtype:bf16/placement:in"]["wrong"] >= 1


def test_serial_idle_times_each_collective_after_idle():
    data, proc = run_json(2, "zb_collectives", ["--ops=all_gather", "--min-bytes=64K", "--max-bytes=64K",
                                               "--iters=3", "--progress=thread", "--serial",
                                               "--serial-idle-us=200"])
    b = benchmarks(data)["all_gather/bytes:65536/dtype:bf16"]
    assert b["serial_idle_s"] > 0 and b["serial_s"] > 0 and b["wrong"] == 0


@pytest.mark.parametrize("np,corrupt", [(2, 0), (2, 1), (3, 2)])
def test_all_to_all_counts_a_corrupted_block_element(np, corrupt):
    # The corrupted element is the middle one of the sender's buffer, in the block for rank 1:
    # another rank's (it crosses the wire), or at 2 ranks from rank 1 its own (a local copy).
    # Exactly that element arrives wrong.
    data, proc = run_json(np, "zb_collectives", ["--ops=all_to_all", "--min-bytes=4K", "--max-bytes=4K",
                                                "--iters=2", f"--fault-corrupt={corrupt}"], expect_rc=1)
    padded = -(-2048 // np) * np
    b = benchmarks(data)[f"all_to_all/bytes:{padded * 2}/dtype:bf16"]
    assert b["wrong"] == 1, proc.stdout
    assert "wrong elements" in proc.stderr


@pytest.mark.parametrize("np", [2, 3])
@pytest.mark.parametrize("timing,progress", [("batch", "caller"), ("per-iter", "thread")])
def test_every_size_is_held_against_the_bare_library_call(np, timing, progress):
    data, proc = run_json(np, "zb_collectives", ["--min-bytes=4K", "--max-bytes=64K", "--step-factor=16",
                                                 f"--timing={timing}", f"--progress={progress}",
                                                 "--iters=3", "--warmup=1"])
    runs = benchmarks(data)
    assert len(runs) == 6, proc.stdout
    for name, b in runs.items():
        assert b["wrong"] == 0, name
        assert b["bare_time_s"] > 0 and b["overhead_ratio"] > 0 and b["bare_repeat_ratio"] > 0, name
        assert b["ours_repeat_ratio"] > 0, name
        assert b["reference_s"] > 0, name  # the host's speed meanwhile, for zb_predict
        # overhead_ratio is zerobench's time over the bare call's, both as reported.
        assert b["overhead_ratio"] == pytest.approx(b["real_time"] * 1e-6 / b["bare_time_s"], rel=1e-6), name
        if timing == "per-iter":
            assert 0 < b["p50_s"] <= b["p99_s"], name
        else:
            assert "p50_s" not in b and "p99_s" not in b, name
    assert f"timing {timing}, progress {progress}" in proc.stdout


def test_serial_times_each_collective_waited_for_only_when_asked():
    args = ["--ops=all_reduce,all_gather", "--min-bytes=64K", "--max-bytes=64K", "--progress=thread",
            "--iters=3", "--warmup=1"]
    serial, _ = run_json(2, "zb_collectives", [*args, "--serial"])
    plain, _ = run_json(2, "zb_collectives", args)
    for name, b in benchmarks(serial).items():
        assert b["serial_s"] > 0 and b["wrong"] == 0, name
    assert all("serial_s" not in b for b in benchmarks(plain).values())


def test_node_groups_adds_the_node_and_cross_groups_only_across_nodes():
    args = ["--ops=all_gather", "--min-bytes=4K", "--max-bytes=4K", "--iters=1", "--warmup=0", "--node-groups"]
    one, _ = run_json(2, "zb_collectives", args)
    assert [n.split("/iterations")[0] for n in benchmarks(one)] == ["all_gather/bytes:4096/dtype:bf16"]
    two, _ = run_json(2, "zb_collectives", [*args, "--ranks-per-node=1"])
    names = sorted(n.split("/dtype:bf16")[1] for n in benchmarks(two))
    assert names == ["", "/group:cross", "/group:node"], names
    assert all(b["wrong"] == 0 for b in benchmarks(two).values())


def test_without_the_baseline_there_is_no_ratio():
    data, _ = run_json(2, "zb_collectives", ["--ops=all_gather", "--min-bytes=4K", "--max-bytes=4K",
                                            "--no-bare", "--iters=2", "--warmup=0"])
    b = benchmarks(data)["all_gather/bytes:4096/dtype:bf16"]
    assert is_nan(b["bare_time_s"]) and is_nan(b["overhead_ratio"]) and is_nan(b["bare_repeat_ratio"])
    assert is_nan(b["ours_repeat_ratio"])


def test_a_bad_flag_under_mpirun_is_one_line_from_one_rank():
    # The flags are checked before MPI starts; the launcher's rank variable says who prints.
    proc = mpirun(2, "zb_collectives", ["--min-bytes=4K", "--max-bytes=4K", "--json=/tmp"], timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert len([l for l in proc.stderr.splitlines() if l.startswith("zb_collectives: ")]) == 1, proc.stderr
    assert "--json: /tmp is a folder" in proc.stderr
    assert "all_reduce/" not in proc.stdout  # no benchmark ran


BAD = [["--ops=alltoall"], ["--dtype=fp16"], ["--min-bytes=0"], ["--min-bytes=4Q"],
       ["--step-factor=0.5"], ["--iters=0"], ["--timeout=-1"], ["--backend=tcp"],
       ["--min-bytes=8K", "--max-bytes=4K"], ["--fault-skip=x"], ["--frobnicate"], ["extra"],
       (["--benchmark_nonsense=1"], "--benchmark_nonsense"), ["--timing=median"], ["--progress=none"],
       ["--fault-slow=all_reduce:0"], (["--json=/no/such/dir/x.json"], "--json"), ["--groups=rack"],
       (["--backend=nccl"], "nccl"), (["--fault-stall=1:nap"], "--fault-stall"),
       (["--fault-stall=-1:fence"], "--fault-stall"), ["--show-backend=maybe"],
       (["--serial-idle-us=200"], "add --serial"), ["--serial", "--serial-idle-us=-1"], ["--footprint=x"],
       ["--footprint-ops=gather"], ["--footprint=4M,4M"], ["--footprint=0,"], ["--gather-footprint=x"],
       (["--gather-footprint=0"], "--gather-footprint"),
       (["--footprint=0,1M", "--gather-footprint=1M"], "--gather-footprint")]


def test_bad_flags_exit_2_with_one_line_before_mpi():
    assert not bad_flag_failures("zb_collectives", BAD)


def test_show_backend_prints_one_word_without_mpi():
    proc = run_single("zb_collectives", ["--show-backend"])
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout in ("mpi\n", "nccl\n")
    assert run_single("zb_collectives", ["--backend=mpi", "--show-backend"]).stdout == "mpi\n"


def test_help_documents_every_flag():
    proc = run_single("zb_collectives", ["--help"])
    assert proc.returncode == 0
    for flag in ("--ops", "--min-bytes", "--max-bytes", "--step-factor", "--dtype", "--iters",
                 "--warmup", "--check", "--backend", "--json", "--timeout", "--timing", "--progress",
                 "--bare"):
        assert flag in proc.stdout


def test_collectives_over_node_and_cross_groups_are_correct_and_named():
    # 4 ranks as 2 declared nodes of 2: each group runs its own collective, checked against
    # its own ranks' patterns, and the name says which group.
    data, proc = run_json(4, "zb_collectives", ["--ranks-per-node=2", "--groups=world,node,cross",
                                               "--min-bytes=1001", "--max-bytes=1001", "--iters=2",
                                               "--warmup=1", EVERY_OP])
    runs = benchmarks(data)
    assert len(runs) == 12, proc.stdout
    for name, b in runs.items():
        assert b["wrong"] == 0, name
        group = name.split("/group:")[1] if "/group:" in name else "world"
        assert b["ranks"] == (4 if group == "world" else 2), name
        # Inside a node nothing crosses the node boundary; across nodes it all does.
        if group == "node":
            assert b["inter_node_bytes_formula"] == 0, name
        if group == "cross":
            assert b["inter_node_bytes_formula"] == 2 * b["wire_bytes_formula"], name
        # Over the world an all-to-all sends each rank of the other node a block and its own
        # node's other rank one: twice as much leaves a node as stays in it.
        if group == "world" and name.startswith("all_to_all"):
            assert b["inter_node_bytes_formula"] == 2 * b["intra_node_bytes_formula"], name
