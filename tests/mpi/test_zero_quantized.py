"""ZeRO++ and FP8 in zb_zero and zb_plan: the volume of every quantized configuration, worked out
here by hand, equals the accounting exactly and the bytes measured at the sockets within 1%;
zb_plan states the same; every configuration ends inside the interval its error bounds allow at
2, 3 and 4 ranks, and a planted fault outside it is counted; bad combinations of flags are one
line and exit 2, before MPI starts."""

import pytest

from zbrun import TCP_RING, bad_flag_failures, benchmarks, is_nan, run_json

from test_plan import run as run_plan
from test_zero import formula

BLOCK = 4096  # ZeRO++'s block: one FP32 scale per 4096 elements, for weights and gradients
# Bytes per element on the wire over 2: the share of Ψ of BF16 elements a quantized pass moves,
# whole blocks (the cases below make every rank's piece a whole number of blocks).
WEIGHTS = {"none": 1.0, "int8": (1 + 4 / BLOCK) / 2, "fp8": 1 / 2}
GRADS = {"none": 1.0, "int8": (1 + 4 / BLOCK) / 2, "int4": (1 / 2 + 4 / BLOCK) / 2}


def label(name):
    """'zero/stage:z3/quantize_weights:int8/params:...' -> ('z3', 'int8', 'none')."""
    seg = dict(s.split(":", 1) for s in name.split("/")[1:] if ":" in s)
    return seg["stage"], seg.get("quantize_weights", "none"), seg.get("quantize_grads", "none")


def rows(data):
    return {label(name): b for name, b in benchmarks(data).items()}


def passes(stage, qw, qg, n, s, psi, units):
    """(group, share of Ψ) of each collective of one step; zpp is hpz with INT8 weights and
    INT4 gradients. qgZ replaces the reduce-scatter with an all-to-all within the node, then one
    across nodes carrying the node's sum of 1/S of the vector; FP8 gathers an FP32 amax per
    rank and unit once a step (two BF16 elements each)."""
    if stage == "zpp":
        stage, qw, qg = "hpz", "int8", "int4"
    nodes = n // s
    out = []
    if qg == "none":
        out.append(("world", 1.0))
    else:
        if nodes == 1 or s > 1:
            out.append(("node", GRADS[qg]))
        if nodes > 1:
            out.append(("cross", GRADS[qg] / s))
    if stage == "z2":
        return out + [("world", 1.0)]
    if qw == "fp8":
        out.append(("world", 2 * n * units / psi))
    out.append(("world", WEIGHTS[qw]))
    out.append(("node", 1.0) if stage == "hpz" else ("world", WEIGHTS[qw]))
    return out


def volumes(stage, qw, qg, n, s, psi, units):
    """(intra, inter) in Ψ: a world group spans nodes when there are several."""
    intra = inter = 0.0
    for group, share in passes(stage, qw, qg, n, s, psi, units):
        if group == "node" or n == s:
            intra += share
        else:
            inter += share
    return intra, inter


# 8 layers of 65536: at 2 and 4 ranks every rank's piece of a layer is whole blocks of 4096.
PSI, LAYERS = 8 * 65536, 8
CONFIGS = {("z2", "none", "none"), ("z2", "none", "int4"), ("hpz", "none", "none"), ("hpz", "none", "int4"),
           ("zpp", "none", "none")} | {(st, w, g) for st in ("z3", "hpz") for w in ("int8", "fp8")
                                       for g in ("none", "int4")} | {("z3", "none", g) for g in ("none", "int4")}


def test_volumes_are_exact_by_accounting_and_within_1_percent_at_the_sockets():
    # Two declared nodes of two ranks over TCP rings: the accounting splits within and across
    # nodes; the sockets see the total.
    data, proc = run_json(4, "zb_zero", [f"--params={PSI}", f"--layers={LAYERS}", "--bucket-mb=0.25",
                                         "--ranks-per-node=2", "--stages=z2,z3,hpz,zpp",
                                         "--quantize-weights=none,int8,fp8", "--quantize-grads=none,int4",
                                         "--iters=1", "--warmup=0"], mca=TCP_RING)
    got = rows(data)
    assert set(got) == CONFIGS, proc.stdout
    for (stage, qw, qg), b in got.items():
        assert b["padding"] == 0 and b["params"] == PSI
        assert b["wrong"] == 0, ((stage, qw, qg), proc.stdout)
        intra, inter = volumes(stage, qw, qg, 4, 2, PSI, LAYERS)
        assert b["volume_psi_intra_accounted"] == pytest.approx(intra, rel=1e-12), (stage, qw, qg)
        assert b["volume_psi_inter_accounted"] == pytest.approx(inter, rel=1e-12), (stage, qw, qg)
        assert b["volume_psi_accounted"] == pytest.approx(intra + inter, rel=1e-12), (stage, qw, qg)
        assert not is_nan(b["volume_psi_measured"]), proc.stdout
        assert b["volume_psi_measured"] == pytest.approx(intra + inter, rel=0.01), (stage, qw, qg)
        # Quantization moves fewer bytes and keeps the same resident state.
        want = formula("hpz" if stage == "zpp" else stage, "adam", "bf16", 4, 2)
        assert b["bytes_per_param_formula"] == pytest.approx(want, rel=1e-12)
        assert b["bytes_per_param_accounted"] == pytest.approx(want, rel=1e-3), (stage, qw, qg)
        quantized = stage == "zpp" or qw != "none" or qg != "none"
        assert (b.get("quantize_s", 0) > 0) == quantized, (stage, qw, qg)
    # What ZeRO++ claims: zpp sends a quarter of z3 across nodes, plus the scales.
    assert got[("zpp", "none", "none")]["volume_psi_inter_accounted"] == pytest.approx(
        (1 + 4 / BLOCK) / 2 + GRADS["int4"] / 2, rel=1e-12)


def test_zb_plan_states_the_same_volumes():
    res = run_plan(f"--params={PSI}", "--dp=4", "--ranks-per-node=2", "--stages=z2,z3,hpz,zpp",
                   "--quantize-weights=none,int8", "--quantize-grads=none,int4")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    table = {}
    for line in res.stdout.splitlines():
        f = line.split()
        if f and f[0].split("+")[0] in ("z2", "z3", "hpz", "zpp"):
            table[f[0]] = (float(f[7]), float(f[10]))  # Psi/step, inter Psi
    assert set(table) == {"z2", "z2+qg:int4", "z3", "z3+qg:int4", "z3+qw:int8", "z3+qw:int8+qg:int4", "hpz",
                          "hpz+qg:int4", "hpz+qw:int8", "hpz+qw:int8+qg:int4", "zpp"}, res.stdout
    for name, (total, inter) in table.items():
        stage, q = name.split("+")[0], dict(p.split(":") for p in name.split("+")[1:])
        intra, want_inter = volumes(stage, q.get("qw", "none"), q.get("qg", "none"), 4, 2, PSI, LAYERS)
        # The plan counts as the ZeRO paper does and prints three decimals.
        assert total == pytest.approx(intra + want_inter, abs=6e-4), name
        assert inter == pytest.approx(want_inter, abs=6e-4), name


@pytest.mark.parametrize("np", [2, 3])
def test_every_configuration_ends_inside_its_bound(np):
    # Ψ not a multiple of the ranks or the block: pieces pad, the last block is short. (4 ranks:
    # the volume test above runs the check.)
    data, proc = run_json(np, "zb_zero", ["--params=100003", "--layers=5", "--bucket-mb=0.05",
                                          "--stages=z2,z3,hpz,zpp", "--quantize-weights=int8,fp8",
                                          "--quantize-grads=int8,int4", "--iters=2", "--warmup=0"])
    got = rows(data)
    assert len(got) == 2 + 4 + 4 + 1, proc.stdout  # z2: grads only; zpp: its own
    for key, b in got.items():
        assert b["wrong"] == 0, (key, proc.stdout)
        assert 0 < b["weight_error_max"] <= b["weight_error_bound"], key
        assert 0 < b["weight_error_rms"] <= b["weight_error_max"], key


def test_a_planted_fault_outside_the_bound_is_counted():
    # Rank 1's first gradient element is corrupted far beyond what any quantization could do.
    data, proc = run_json(2, "zb_zero", ["--params=10000", "--layers=2", "--stages=z2,z3,zpp",
                                         "--quantize-weights=fp8", "--quantize-grads=int4", "--iters=2",
                                         "--warmup=0", "--fault-corrupt=1"], expect_rc=1)
    got = rows(data)
    assert len(got) == 3
    for key, b in got.items():
        assert b["wrong"] >= 1, key
    assert "outside the quantization's bound" in proc.stderr


BAD = [(["--quantize-weights=int4"], "--quantize-weights"), (["--quantize-grads=fp8"], "--quantize-grads"),
       (["--stages=z1,z2", "--quantize-weights=int8"], "applies to z3, hpz"),
       (["--stages=dp,z1", "--quantize-grads=int4"], "applies to z2, z3, hpz"),
       (["--stages=zpp", "--quantize-grads=int8"], "--stages names none of them"),
       (["--stages=hsdp", "--quantize-weights=fp8"], "--quantize-weights=fp8")]


def test_bad_combinations_exit_2_with_one_line_before_mpi():
    assert not bad_flag_failures("zb_zero", BAD)
    assert not bad_flag_failures("zb_plan", [(["--params=1e9", "--dp=4", *a], w) for a, w in BAD])
