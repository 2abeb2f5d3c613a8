"""zb_zero over nodes declared with --ranks-per-node (no cluster needed): every stage, hsdp and
hpz included, ends bit for bit on the reference; volumes within and across nodes and the
inter-node and intra-node bytes of rings are exactly what this file works out by hand; memory
per parameter follows (w+g+o)/S and (w+g+o)/N + w/S; and declared nodes measure nothing."""

import pytest

from zbrun import benchmarks, is_nan, run_json

from test_zero import by_stage, formula

# Each stage's collectives per step: (op, group, share of Ψ moved). hsdp all-reduces its node
# shard (Ψ/S) across nodes, and only when there are several nodes; hpz's backward gathers
# within the node.
def passes(stage, s, nodes):
    return {
        "dp": [("ar", "world", 1)],
        "z1": [("rs", "world", 1), ("ag", "world", 1)],
        "z2": [("rs", "world", 1), ("ag", "world", 1)],
        "z3": [("rs", "world", 1), ("ag", "world", 1), ("ag", "world", 1)],
        "hsdp": [("rs", "node", 1), ("ag", "node", 1), ("ag", "node", 1)]
        + ([("ar", "cross", 1 / s)] if nodes > 1 else []),
        "hpz": [("rs", "world", 1), ("ag", "world", 1), ("ag", "node", 1)],
    }[stage]


def expected(stage, n, s, psi, grad_bytes):
    """Volumes (Ψ) within and across nodes, and the bytes a node sends per step to other nodes
    and to its own ranks, rings in rank order over nodes of s consecutive ranks."""
    nodes = n // s
    size = {"world": n, "node": s, "cross": nodes}
    intra = inter = inter_bytes = intra_bytes = 0.0
    for op, group, share in passes(stage, s, nodes):
        k, twice = size[group], 2 if op == "ar" else 1
        spans = group != "node" and nodes > 1
        if spans:
            inter += twice * share
        else:
            intra += twice * share
        # One rank's sends to the next rank of its ring.
        sent = twice * share * psi * (k - 1) / k * (2 if op == "ag" else grad_bytes)
        # How many of a node's ranks send to another node: a world ring leaves each node once;
        # in a cross ring every rank's next rank is elsewhere; a node ring never leaves.
        leaving = {"world": 1 if nodes > 1 else 0, "cross": s if nodes > 1 else 0, "node": 0}[group]
        inter_bytes += leaving * sent
        intra_bytes += ((s if k > 1 else 0) - leaving) * sent if group != "cross" else 0
    return intra, inter, inter_bytes, intra_bytes


CASES = [(4, 2, "adam", "bf16"), (4, 1, "momentum", "fp32"), (6, 3, "adam", "fp32")]


@pytest.mark.parametrize("np,rpn,optimizer,grad", CASES)
def test_every_stage_matches_the_reference_and_the_node_accounting(np, rpn, optimizer, grad):
    # 12 layers of 60000 parameters: every unit divides by 1, 2, 3, 4 and 6, so nothing pads.
    psi = 720000
    data, proc = run_json(np, "zb_zero", [f"--params={psi}", "--layers=12", "--bucket-mb=0.1",
                                          f"--ranks-per-node={rpn}", f"--optimizer={optimizer}",
                                          f"--grad-dtype={grad}", "--iters=2", "--warmup=1"])
    rows = by_stage(data)
    assert set(rows) == {"dp", "z1", "z2", "z3", "hsdp", "hpz"}, proc.stdout
    gb = 2 if grad == "bf16" else 4
    for stage, b in rows.items():
        assert b["wrong"] == 0, (stage, proc.stdout)
        assert b["padding"] == 0 and b["params"] == psi
        assert (b["nodes"], b["ranks_per_node"]) == (np // rpn, rpn)
        intra, inter, inter_bytes, intra_bytes = expected(stage, np, rpn, psi, gb)
        assert b["volume_psi_intra_accounted"] == pytest.approx(intra, rel=1e-12), stage
        assert b["volume_psi_inter_accounted"] == pytest.approx(inter, rel=1e-12), stage
        assert b["volume_psi_accounted"] == pytest.approx(intra + inter, rel=1e-12), stage
        assert b["inter_node_bytes_accounted"] == pytest.approx(inter_bytes, rel=1e-12), stage
        assert b["intra_node_bytes_accounted"] == pytest.approx(intra_bytes, rel=1e-12), stage
        assert b["bytes_per_param_formula"] == pytest.approx(formula(stage, optimizer, grad, np, rpn), rel=1e-12)
        # Declared nodes are not the machine's: no counter can say what crossed them.
        assert is_nan(b["inter_node_bytes_measured"]) and is_nan(b["intra_node_bytes_measured"])
    assert "declared" in proc.stdout


def test_hsdp_and_hpz_memory_matches_the_formula():
    data, proc = run_json(4, "zb_zero", ["--params=4e6", "--layers=8", "--ranks-per-node=2",
                                         "--stages=hsdp,hpz", "--iters=1", "--warmup=0", "--no-check"])
    rows = by_stage(data)
    assert set(rows) == {"hsdp", "hpz"}
    for stage, b in rows.items():
        want = formula(stage, "adam", "bf16", 4, 2)  # 8 and 5
        assert b["bytes_per_param_formula"] == pytest.approx(want, rel=1e-12)
        assert b["bytes_per_param_measured"] == pytest.approx(want, rel=0.01), (stage, proc.stdout)
        assert b["bytes_per_param_accounted"] == pytest.approx(want, rel=0.001)


def test_a_corrupted_gradient_fails_hsdp_and_hpz():
    data, proc = run_json(4, "zb_zero", ["--params=10000", "--layers=2", "--ranks-per-node=2",
                                         "--stages=hsdp,hpz", "--iters=2", "--warmup=0",
                                         "--fault-corrupt=3"], expect_rc=1)
    for stage, b in by_stage(data).items():
        assert b["wrong"] >= 1, stage
    assert "differ from the reference" in proc.stderr


def test_declared_nodes_must_divide_the_ranks():
    data, proc = run_json(3, "zb_zero", ["--params=1000", "--layers=2", "--ranks-per-node=2"],
                          expect_rc=2)
    assert data is None
    lines = [l for l in proc.stderr.splitlines() if l.strip() and "zb_zero" in l]
    assert len(lines) == 1 and "--ranks-per-node=2 must divide" in lines[0], proc.stderr


def test_zb_collectives_hierarchical_all_reduce_over_declared_nodes():
    data, proc = run_json(4, "zb_collectives", ["--ops=all_reduce,hier_all_reduce", "--min-bytes=1000",
                                                "--max-bytes=1000000", "--step-factor=1000",
                                                "--ranks-per-node=2", "--iters=2", "--warmup=1"])
    rows = benchmarks(data)
    # 1000 B is 500 BF16 elements, a multiple of the 2 ranks per node; 1e6 B likewise.
    for size in (1000, 1000000):
        flat, hier = rows[f"all_reduce/bytes:{size}/dtype:bf16"], rows[f"hier_all_reduce/bytes:{size}/dtype:bf16"]
        assert flat["wrong"] == 0 and hier["wrong"] == 0
        # Flat ring: one rank per node sends 2(N-1)/N of the buffer to the next node. Hierarchical:
        # both ranks send 2(R-1)/R of their half across, 1x the buffer per node.
        assert flat["inter_node_bytes_formula"] == pytest.approx(1.5 * size, rel=1e-12)
        assert hier["inter_node_bytes_formula"] == pytest.approx(1.0 * size, rel=1e-12)
        # Per rank both send 1.5x the buffer (node reduce-scatter, cross all-reduce of half,
        # node all-gather: 0.5 + 0.5 + 0.5).
        assert hier["wire_bytes_formula"] == pytest.approx(flat["wire_bytes_formula"], rel=1e-12)
        assert is_nan(hier["inter_node_bytes_measured"])
