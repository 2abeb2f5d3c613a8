"""tools/cluster.sh at 2 nodes x 2 ranks: zb_zero's every stage bit for bit, its inter-node bytes
measured at the nodes' links within 2% of the rings' accounting, plus whatever TCP resent (and
the same-node bytes at the nodes' loopbacks), the quantized gathers and zpp likewise,
zb_collectives' flat and hierarchical all-reduce likewise, also launched from the environment
with the gloo backend (run --env); the cluster leaves nothing behind, on a normal exit and when
its job is stopped by a signal.

Needs root and network namespaces; skipped with the reason where they are missing."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "mpi"))
from zbrun import BIN, TCP_RING, benchmarks  # noqa: E402
from test_zero_nodes import expected  # noqa: E402

ROOT = os.environ.get("ZB_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
CLUSTER = os.path.join(ROOT, "tools", "cluster.sh")
NAME = "t" + uuid.uuid4().hex[:6]  # this test's own cluster, whatever else is up


def cluster(*args, timeout=600):
    return subprocess.run([CLUSTER, *args], capture_output=True, text=True, timeout=timeout)


def leftovers(name):
    """Everything of cluster `name` still on the machine."""
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    out = [line.split()[0] for line in ns.splitlines() if line.startswith(f"zbc-{name}-")]
    out += [p for p in (f"/run/zbcluster/{name}",) if os.path.exists(p)]
    out += [p for p in (f"/etc/netns/zbc-{name}-n0", f"/etc/netns/zbc-{name}-n1") if os.path.exists(p)]
    return out


@pytest.fixture(scope="module")
def up():
    if os.geteuid() != 0:
        pytest.skip("the simulated cluster needs root (network namespaces, veth pairs)")
    if not (shutil.which("ip") and shutil.which("tc")):
        pytest.skip("the simulated cluster needs iproute2 (ip, tc): apt-get install -y iproute2")
    probe = subprocess.run(["ip", "netns", "add", f"zbc-{NAME}-probe"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a network namespace here: {probe.stderr.strip()}")
    subprocess.run(["ip", "netns", "delete", f"zbc-{NAME}-probe"])
    r = cluster("up", "--nodes=2", "--ranks-per-node=2", f"--name={NAME}")
    assert r.returncode == 0, r.stdout + r.stderr
    yield NAME
    r = cluster("down", f"--name={NAME}")
    assert r.returncode == 0, r.stderr
    assert leftovers(NAME) == []


def retransmitted_bytes(name):
    """At most how many bytes TCP has sent again from the nodes of cluster `name` so far: the
    segments its counters say it retransmitted, each at most a full link frame. On this 2-core
    machine under load the links reorder packets (the nodes receive duplicate SACKs), TCP
    resends a segment it need not have, and the link's counter counts it again."""
    total = 0
    for i in (0, 1):
        ns = f"zbc-{name}-n{i}"
        snmp = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"],
                              capture_output=True, text=True, check=True).stdout.splitlines()
        head, values = [line.split() for line in snmp if line.startswith("Tcp:")][:2]
        mtu = subprocess.run(["ip", "netns", "exec", ns, "cat", "/sys/class/net/uplink/mtu"],
                             capture_output=True, text=True, check=True).stdout
        total += int(values[head.index("RetransSegs")]) * int(mtu)
    return total


def run_json(name, mca, program, args, tmp_path):
    """The job's benchmarks by name, its process, and `resent`: the most bytes per timed
    iteration that TCP's retransmissions during the job can have added to a node link's
    counter (0 when there were none, as on an idle machine)."""
    path = tmp_path / f"{program}.json"
    before = retransmitted_bytes(name)
    r = cluster("run", f"--name={name}", *mca, "--", os.path.join(BIN, program), *args, f"--json={path}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    iters = next(int(a.split("=")[1]) for a in args if a.startswith("--iters="))
    r.resent = (retransmitted_bytes(name) - before) / iters
    return benchmarks(json.loads(path.read_text())), r


def test_zero_every_stage_across_two_nodes(up, tmp_path):
    psi = 1_600_000  # 8 layers of 200000: big enough that the fences' bytes are far below 1%
    rows, r = run_json(up, TCP_RING, "zb_zero", [f"--params={psi}", "--layers=8", "--bucket-mb=0.4",
                                                 "--iters=2", "--warmup=1"], tmp_path)
    stages = {name.split("/")[1].split(":")[1]: b for name, b in rows.items()}
    assert set(stages) == {"dp", "z1", "z2", "z3", "hsdp", "hpz"}, r.stdout
    for stage, b in stages.items():
        assert b["wrong"] == 0, (stage, r.stdout)
        assert (b["nodes"], b["ranks_per_node"]) == (2, 2)
        intra, inter, inter_bytes, intra_bytes = expected(stage, 4, 2, psi, 2)
        assert b["volume_psi_inter_accounted"] == pytest.approx(inter, rel=1e-12), stage
        assert b["inter_node_bytes_accounted"] == pytest.approx(inter_bytes, rel=1e-12), stage
        # The node link's transmit counter: the payload plus TCP/IP headers and the fences'
        # own few hundred bytes, so a little above the accounting, never below (and what TCP
        # resent, which it counts again).
        assert inter_bytes <= b["inter_node_bytes_measured"] <= 1.02 * inter_bytes + r.resent, (stage, r.stdout)
        # Over the tcp BTL a node's ranks talk through its loopback, which counts them too.
        assert intra_bytes <= b["intra_node_bytes_measured"] <= 1.02 * intra_bytes, (stage, r.stdout)
    assert "the node link's counter" in r.stdout


def test_quantized_configurations_across_two_nodes(up, tmp_path):
    # 8 layers of 262144: every rank's piece is 16 whole blocks of 4096, so the bytes are exact.
    psi, w8, g4 = 8 * 262144, (1 + 4 / 4096) / 2, (1 / 2 + 4 / 4096) / 2
    rows, r = run_json(up, TCP_RING, "zb_zero", [f"--params={psi}", "--layers=8", "--stages=z3,zpp",
                                                 "--quantize-weights=int8,fp8", "--iters=2", "--warmup=1"],
                       tmp_path)
    got = {name.split("/iterations")[0].split("/params")[0]: b for name, b in rows.items()}
    ring = 3 / 4 * 2  # a world ring leaves each node once, (N-1)/N of each pass, 2 bytes an element
    want = {"zero/stage:z3/quantize_weights:int8": (1 + 2 * w8) * psi * ring,
            "zero/stage:z3/quantize_weights:fp8": (1 + 2 * 0.5) * psi * ring + 2 * 4 * 8 * ring,
            # zpp: the INT8 gather over all ranks, and qgZ's hop across, where both ranks of a
            # node send half of their g4/2 of the vector to the other node.
            "zero/stage:zpp": w8 * psi * ring + 2 * (g4 / 2 * psi) * 1 / 2 * 2}
    assert set(got) == set(want), r.stdout
    for name, bytes_ in want.items():
        b = got[name]
        assert b["wrong"] == 0, (name, r.stdout)
        assert b["inter_node_bytes_accounted"] == pytest.approx(bytes_, rel=1e-12), name
        assert bytes_ <= b["inter_node_bytes_measured"] <= 1.02 * bytes_ + r.resent, (name, r.stdout)


def test_collectives_flat_and_hierarchical_across_two_nodes(up, tmp_path):
    rows, r = run_json(up, TCP_RING[6:], "zb_collectives",  # ring algorithms, shared memory within nodes
                       ["--ops=all_reduce,hier_all_reduce", "--min-bytes=4M", "--max-bytes=4M",
                        "--iters=3", "--warmup=1", "--no-bare"], tmp_path)
    size = 4 << 20
    flat, hier = rows[f"all_reduce/bytes:{size}/dtype:bf16"], rows[f"hier_all_reduce/bytes:{size}/dtype:bf16"]
    for b, want in ((flat, 1.5 * size), (hier, 1.0 * size)):
        assert b["wrong"] == 0, r.stdout
        assert b["inter_node_bytes_formula"] == pytest.approx(want, rel=1e-12)
        assert want <= b["inter_node_bytes_measured"] <= 1.02 * want + r.resent, r.stdout


def test_an_environment_launch_with_gloo_across_two_nodes(up, tmp_path):
    # run --env: four plain processes with torchrun's variables, rank 0's address on node 0; Gloo's
    # TCP pairs carry the all-reduce, and the node links count it within 1% of the accounting.
    gloo = subprocess.run([os.path.join(BIN, "zb_collectives"), "--backend=gloo", "--show-backend"],
                          capture_output=True, text=True)
    if gloo.returncode != 0:
        pytest.skip("this build has no Gloo")
    rows, r = run_json(up, ["--env"], "zb_collectives",
                       ["--backend=gloo", "--ops=all_reduce,hier_all_reduce", "--min-bytes=4M",
                        "--max-bytes=4M", "--iters=3", "--warmup=1", "--no-bare", "--timeout=120"],
                       tmp_path)
    size = 4 << 20
    flat, hier = rows[f"all_reduce/bytes:{size}/dtype:bf16"], rows[f"hier_all_reduce/bytes:{size}/dtype:bf16"]
    for b, want in ((flat, 1.5 * size), (hier, 1.0 * size)):
        assert b["wrong"] == 0 and (b["nodes"], b["ranks_per_node"]) == (2, 2), r.stdout
        assert b["inter_node_bytes_formula"] == pytest.approx(want, rel=1e-12)
        assert want <= b["inter_node_bytes_measured"] <= 1.01 * want + r.resent, (r.resent, r.stdout)
    assert "backend gloo" in r.stdout


def test_a_stopped_job_leaves_no_process_behind(up):
    # A job stopped by a signal: cluster.sh stops it and every process it started in the nodes.
    p = subprocess.Popen([CLUSTER, "run", f"--name={up}", "--", "sleep", "300"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = []
    for _ in range(100):  # until both nodes run their sleeps
        pids = [subprocess.run(["ip", "netns", "pids", f"zbc-{up}-n{i}"], capture_output=True,
                               text=True).stdout.split() for i in (0, 1)]
        if all(len(p_) >= 2 for p_ in pids):
            break
        time.sleep(0.1)
    assert all(pids), "the job never started on both nodes"
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) != 0
    for _ in range(50):
        left = [subprocess.run(["ip", "netns", "pids", f"zbc-{up}-n{i}"], capture_output=True,
                               text=True).stdout.split() for i in (0, 1)]
        if not any(left):
            break
        time.sleep(0.1)
    assert not any(left), left


def test_up_with_bad_options_makes_nothing(up):
    name = "b" + uuid.uuid4().hex[:6]
    for args in (["--nodes=0", "--ranks-per-node=2"], ["--nodes=2"], ["--nodes=2", "--ranks-per-node=1", "--link-gbps=x"]):
        r = cluster("up", *args, f"--name={name}")
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = cluster("frobnicate")
    assert r.returncode == 2
    assert leftovers(name) == []


def test_a_failed_up_removes_what_it_made_and_nothing_else(up):
    name = "f" + uuid.uuid4().hex[:6]
    # A namespace of node 1's name that up did not make: up fails there, half-way, removes the
    # switch and node 0 it had made, and leaves the one it found.
    theirs = f"zbc-{name}-n1"
    assert subprocess.run(["ip", "netns", "add", theirs]).returncode == 0
    try:
        r = cluster("up", "--nodes=2", "--ranks-per-node=1", f"--name={name}")
        assert r.returncode == 1 and theirs in r.stderr, r.stderr
        assert leftovers(name) == [theirs]
    finally:
        subprocess.run(["ip", "netns", "delete", theirs])
    assert leftovers(name) == []
