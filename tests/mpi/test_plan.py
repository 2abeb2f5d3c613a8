# zb_plan against hand-computed layouts; runs the built binary, no MPI launch needed.
import json
import os
import re
import subprocess

import pytest

from zbrun import bad_flag_failures

ZB_PLAN = os.path.join(os.environ.get("ZB_BIN", "build/bin"), "zb_plan")
COLUMNS = ["bytes_per_param", "gb_per_gpu", "weights_gb", "grads_gb", "master_gb",
           "moments_gb", "volume_psi", "elements_per_step", "gb_per_step", "inter_psi",
           "inter_gb_per_gpu"]
STAGES = ("dp", "z1", "z2", "z3", "hsdp", "hpz")


def run(*args):
    return subprocess.run([ZB_PLAN, *args], capture_output=True, text=True, timeout=60)


def plan(*args):
    """Runs zb_plan and returns {dp: {stage: {column: value}}} parsed from its table."""
    res = run(*args)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    tables, current = {}, None
    for line in res.stdout.splitlines():
        m = re.match(r"dp=(\d+) \(world (\d+)\)", line)
        if m:
            current = tables.setdefault(int(m.group(1)), {})
            continue
        fields = line.split()
        if current is not None and fields and fields[0] in STAGES:
            current[fields[0]] = dict(zip(COLUMNS, map(float, fields[1:])))
    return tables


def test_7b_plain_dp_is_112_gb_and_z3_at_8_is_14():
    t = plan("--params=7e9", "--dp=8")[8]
    assert t["dp"]["gb_per_gpu"] == pytest.approx(112)
    assert t["dp"]["bytes_per_param"] == pytest.approx(16)
    assert t["z1"]["gb_per_gpu"] == pytest.approx(7 * (4 + 12 / 8))
    assert t["z2"]["gb_per_gpu"] == pytest.approx(7 * (2 + 14 / 8))
    assert t["z3"]["gb_per_gpu"] == pytest.approx(14)
    for stage, vol in (("dp", 2), ("z1", 2), ("z2", 2), ("z3", 3)):
        assert t[stage]["volume_psi"] == pytest.approx(vol)
        assert t[stage]["elements_per_step"] == pytest.approx(vol * 7e9, rel=1e-4)
        # Ring: each rank sends 7/8 of every full-buffer pass, all BF16 here.
        assert t[stage]["gb_per_step"] == pytest.approx(vol * 7 * 7 / 8 * 2, abs=1e-3)


def test_dp_list_gives_the_memory_curve():
    tables = plan("--params=7e9", "--dp=1,2,4,8,16,32,64", "--stages=z3,dp")
    assert sorted(tables) == [1, 2, 4, 8, 16, 32, 64]
    for n, t in tables.items():
        assert list(t) == ["z3", "dp"]
        assert t["z3"]["gb_per_gpu"] == pytest.approx(112 / n, abs=1e-3)
        assert t["dp"]["gb_per_gpu"] == pytest.approx(112)
    assert tables[1]["z3"]["gb_per_step"] == 0  # one replica sends nothing


def test_momentum_and_fp32_grads():
    t = plan("--params=1e9", "--dp=4", "--optimizer=momentum", "--grad-dtype=fp32")[4]
    # w=2, g=4, o=8 per parameter.
    assert t["dp"]["bytes_per_param"] == pytest.approx(14)
    assert t["z1"]["bytes_per_param"] == pytest.approx(6 + 8 / 4)
    assert t["z2"]["bytes_per_param"] == pytest.approx(2 + 12 / 4)
    assert t["z3"]["bytes_per_param"] == pytest.approx(14 / 4)
    # dp all-reduces fp32 grads; z3 reduce-scatters fp32 and gathers BF16 twice.
    assert t["dp"]["gb_per_step"] == pytest.approx(0.75 * 2 * 4, abs=1e-3)
    assert t["z3"]["gb_per_step"] == pytest.approx(0.75 * (4 + 2 * 2), abs=1e-3)


def test_pp_tp_layout_shards_over_dp_not_world():
    # 70B over PP=4, TP=2: 8.75e9 params per GPU, replicated over dp=4 ranks.
    tables = plan("--params=70e9", "--tp=2", "--pp=4", "--dp=4", "--world=32")
    t = tables[4]
    assert t["dp"]["gb_per_gpu"] == pytest.approx(8.75 * 16)
    assert t["z1"]["gb_per_gpu"] == pytest.approx(8.75 * (4 + 12 / 4))
    assert t["z2"]["gb_per_gpu"] == pytest.approx(8.75 * (2 + 14 / 4), abs=1e-3)
    assert t["z3"]["gb_per_gpu"] == pytest.approx(35)
    assert t["z3"]["gb_per_gpu"] != pytest.approx(8.75 * 16 / 32)  # not the world size
    assert t["z3"]["bytes_per_param"] == pytest.approx(4)
    assert t["z3"]["elements_per_step"] == pytest.approx(3 * 8.75e9, rel=1e-4)
    # --world alone gives the same dp.
    assert plan("--params=70e9", "--tp=2", "--pp=4", "--world=32") == tables


def test_expert_weights_shard_over_dp_over_ep():
    # 10B, 80% in experts, ep=4, dp=8: dense 2e9 sharded over 8,
    # experts 8e9/4 = 2e9 per GPU sharded over dp/ep = 2.
    t = plan("--params=1e10", "--dp=8", "--ep=4", "--expert-fraction=0.8")[8]
    assert t["dp"]["gb_per_gpu"] == pytest.approx(4 * 16)
    assert t["z1"]["gb_per_gpu"] == pytest.approx(2 * (4 + 12 / 8) + 2 * (4 + 12 / 2))
    assert t["z2"]["gb_per_gpu"] == pytest.approx(2 * (2 + 14 / 8) + 2 * (2 + 14 / 2))
    assert t["z3"]["gb_per_gpu"] == pytest.approx(2 * 16 / 8 + 2 * 16 / 2)
    assert t["z3"]["bytes_per_param"] == pytest.approx(5)
    # Expert gradients ring over 2 ranks (1/2 sent), dense over 8 (7/8 sent).
    assert t["z3"]["gb_per_step"] == pytest.approx(6 * (2 * 7 / 8 + 2 * 1 / 2), abs=1e-3)


def test_json_parses_and_matches_the_table(tmp_path):
    path = tmp_path / "plan.json"
    args = ["--params=1e10", "--dp=4,8", "--ep=2", "--expert-fraction=0.5", "--tp=2",
            f"--json={path}"]
    tables = plan(*args)
    doc = json.loads(path.read_text())
    assert os.listdir(tmp_path) == ["plan.json"]  # no temporary left behind
    assert doc["model"] == {"params": 1e10, "tp": 2, "pp": 1, "ep": 2, "expert_fraction": 0.5,
                            "optimizer": "adam", "grad_dtype": "bf16"}
    assert len(doc["rows"]) == 2 * len(STAGES)
    for row in doc["rows"]:
        assert (row["tp"], row["pp"], row["ep"]) == (2, 1, 2)
        assert row["world"] == 2 * row["dp"]
        shown = tables[row["dp"]][row["stage"]]
        assert row["bytes_per_param"] == pytest.approx(shown["bytes_per_param"], abs=1e-4)
        assert row["gb_per_gpu"] == pytest.approx(shown["gb_per_gpu"], abs=1e-3)
        assert row["gb_per_gpu"] == pytest.approx(row["bytes_per_gpu"] / 1e9)
        assert row["elements_per_step"] == pytest.approx(shown["elements_per_step"], rel=1e-4)
        assert row["bytes_per_step"] / 1e9 == pytest.approx(shown["gb_per_step"], abs=1e-3)
        # dp ranks per node default to gcd(dp, 8): one node here, where hsdp is z3.
        assert row["volume_psi"] == pytest.approx(3 if row["stage"] in ("z3", "hsdp", "hpz") else 2)
        assert row["volume_psi_inter"] == 0 and row["dp_per_node"] == row["dp"]


def test_parameter_counts_are_decimal():
    counts = [plan(f"--params={n}", "--dp=8") for n in ("7G", "7e9", "7000000000", "7000M")]
    assert all(c == counts[0] for c in counts)


def test_hsdp_and_hpz_over_two_nodes_of_eight():
    t = plan("--params=7e9", "--dp=16", "--ranks-per-node=8")[16]
    assert t["hsdp"]["gb_per_gpu"] == pytest.approx(7 * 16 / 8)  # sharded over the node only
    assert t["hpz"]["gb_per_gpu"] == pytest.approx(7 * (16 / 16 + 2 / 8))  # plus w/S
    assert t["hsdp"]["volume_psi"] == pytest.approx(3 + 2 / 8)
    assert t["hsdp"]["inter_psi"] == pytest.approx(2 / 8)
    assert t["hpz"]["inter_psi"] == pytest.approx(2) and t["z3"]["inter_psi"] == pytest.approx(3)
    # Per GPU, what its node sends to the other: a world ring leaves each node from one of its
    # 8 ranks (2 x 15/16 x 14 GB for dp, shared by 8 GPUs); hsdp's cross ring from every rank
    # (2 x 1/2 of Psi/8 in BF16).
    assert t["dp"]["inter_gb_per_gpu"] == pytest.approx(2 * 15 / 16 * 14 / 8, abs=1e-3)
    assert t["z3"]["inter_gb_per_gpu"] == pytest.approx(3 * 15 / 16 * 14 / 8, abs=1e-3)
    assert t["hpz"]["inter_gb_per_gpu"] == pytest.approx(2 * 15 / 16 * 14 / 8, abs=1e-3)
    assert t["hsdp"]["inter_gb_per_gpu"] == pytest.approx(2 * 1 / 2 * 14 / 8, abs=1e-3)


BAD = [
    (["--params=7e9", "--dp=16", "--ranks-per-node=3"], "--ranks-per-node=3"),
    (["--params=7e9", "--world=12", "--tp=2", "--pp=4"], "not divisible"),
    (["--params=7e9", "--dp=8", "--world=16"], "--world=16"),
    (["--params=7e9", "--dp=8", "--ep=3", "--expert-fraction=0.5"], "does not divide"),
    (["--params=7e9", "--dp=0"], "--dp"),
    (["--params=7e9", "--dp=-4"], "--dp"),
    (["--params=7e9", "--dp=8", "--tp=0"], "--tp"),
    (["--params=7e9", "--dp=8", "--pp=-1"], "--pp"),
    (["--params=7e9", "--dp=8", "--ep=0"], "--ep"),
    (["--params=7e9", "--dp=8", "--stages=z1,z4"], "z4"),
    (["--params=seven", "--dp=8"], "--params"),
    (["--params=7e9x", "--dp=8"], "--params"),
    (["--params=0", "--dp=8"], "--params"),
    (["--dp=8"], "--params"),
    (["--params=7e9"], "--dp"),
    (["--params=7e9", "--dp=8", "--expert-fraction=1.5"], "--expert-fraction"),
    (["--params=7e9", "--dp=8", "--optimizer=sgd"], "--optimizer"),
    (["--params=7e9", "--dp=8", "--bogus=1"], "--bogus"),
    (["--params=7e9", "--dp=8,8"], "given twice"),
    (["--params=7e9", "--dp=8", "--dp-per-node=8"], "unknown flag --dp-per-node"),
    (["--params=7.5", "--dp=8"], "whole number"),
]


def test_bad_input_exits_2_with_one_line():
    assert not bad_flag_failures("zb_plan", BAD)


def test_bad_layout_writes_no_json(tmp_path):
    path = tmp_path / "plan.json"
    res = run("--params=7e9", "--dp=8,6", "--ep=4", "--expert-fraction=0.5", f"--json={path}")
    assert res.returncode == 2
    assert os.listdir(tmp_path) == []


def test_help_exits_0():
    res = run("--help")
    assert res.returncode == 0
    assert "--expert-fraction" in res.stdout and "--dp" in res.stdout
