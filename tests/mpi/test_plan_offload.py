# zb_plan --offload against the offload formulas written out here from what each stage shards;
# runs the binary, no MPI launch.
import json
import os
import re
import subprocess

import pytest

from zbrun import bad_flag_failures

ZB_PLAN = os.path.join(os.environ.get("ZB_BIN", "build/bin"), "zb_plan")
STAGE_COLUMNS = ["bytes_per_param", "gb_per_gpu", "weights_gb", "grads_gb", "master_gb", "moments_gb",
                 "volume_psi", "elements_per_step", "gb_per_step", "inter_psi", "inter_gb_per_gpu"]
OFFLOAD_COLUMNS = ["host_bpp", "device_bpp", "saved_gb", "d2h_gb", "h2d_gb"]
STAGES = ("dp", "z1", "z2", "z3", "hsdp", "hpz")
# What each stage splits of (weights, grads, optimizer state): "all" over the dp ranks, "node"
# over the ranks of one node, None kept whole; and whether backward gathers from a node copy.
SHARDING = {"dp": (None, None, None), "z1": (None, None, "all"), "z2": (None, "all", "all"),
            "z3": ("all", "all", "all"), "hsdp": ("node", "node", "node"), "hpz": ("all", "all", "all")}


def run(*args):
    return subprocess.run([ZB_PLAN, *args], capture_output=True, text=True, timeout=60)


def tables(*args):
    """{dp: {stage: {column: value}}} from the stage tables, offload columns included."""
    res = run(*args)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    out, current = {}, None
    for line in res.stdout.splitlines():
        m = re.match(r"dp=(\d+) \(world", line)
        if m:
            current = out.setdefault(int(m.group(1)), {})
            continue
        if line.startswith("pipeline,"):
            current = None  # a pipeline table's rows are not the stage rows
        fields = line.split()
        if current is not None and fields and fields[0] in STAGES:
            assert len(fields) == 1 + len(STAGE_COLUMNS) + len(OFFLOAD_COLUMNS), line
            current[fields[0]] = dict(zip(STAGE_COLUMNS + OFFLOAD_COLUMNS, map(float, fields[1:])))
    return res.stdout, out


def expected(stage, mode, n, s=None, grad=2, moments=8, microbatches=1, slots=2, chunks=1):
    """(host B/param, device B/param, D2H and H2D bytes per step per param) of the GPU."""
    s = s or n
    share = {None: 1.0, "all": 1.0 / n, "node": 1.0 / s}
    ws, gs, os_ = (share[k] for k in SHARDING[stage])
    w = 2 * ws + (2 / s if stage == "hpz" else 0)  # hpz's node copy of the weights
    resident = w + grad * gs + (4 + moments) * os_
    g, o, u, wo = grad * gs, (4 + moments) * os_, 2 * os_, 2 * ws
    host, d2h = g, microbatches * g
    if mode == "grads":
        h2d = g  # the summed gradient back to the optimizer on the GPU
    elif mode == "optimizer":
        host, h2d = g + o, u  # the updated weights this rank owns come back
    else:
        host = g + o + wo
        h2d = microbatches * (1 if stage == "hpz" else 2) * wo
        if u < wo:  # the others' updates reach the host copy through the device
            h2d, d2h = h2d + u, d2h + wo
    slot = slots * (grad + (2 if mode == "weights" else 0)) / chunks
    return host, resident - host + slot, d2h, h2d


def check(row, want, params):
    host, device, d2h, h2d = want
    assert row["host_bpp"] == pytest.approx(host, abs=1e-4)
    assert row["device_bpp"] == pytest.approx(device, abs=1e-4)
    assert row["saved_gb"] == pytest.approx((row["bytes_per_param"] - device) * params / 1e9, abs=1e-3)
    assert row["d2h_gb"] == pytest.approx(d2h * params / 1e9, abs=1e-3)
    assert row["h2d_gb"] == pytest.approx(h2d * params / 1e9, abs=1e-3)


@pytest.mark.parametrize("mode", ["grads", "optimizer", "weights"])
def test_7b_over_8_every_stage(mode):
    text, t = tables("--params=7e9", "--dp=8", f"--offload={mode}", "--chunks=32")
    assert f"offload={mode}:" in text
    assert set(t[8]) == set(STAGES)
    for stage, row in t[8].items():
        check(row, expected(stage, mode, 8, chunks=32), 7e9)


def test_7b_over_8_z2_figures_by_hand():
    _, g = tables("--params=7e9", "--dp=8", "--stages=z2", "--offload=grads", "--chunks=32")
    _, o = tables("--params=7e9", "--dp=8", "--stages=z2", "--offload=optimizer", "--chunks=32")
    _, w = tables("--params=7e9", "--dp=8", "--stages=z2", "--offload=weights", "--chunks=32")
    g, o, w = g[8]["z2"], o[8]["z2"], w[8]["z2"]
    # Gradients: the 2/8 B shard on host; 3.75 - 0.25 on the device plus two slots of 1/32.
    assert (g["host_bpp"], g["device_bpp"], g["d2h_gb"], g["h2d_gb"]) == (0.25, 3.625, 1.75, 1.75)
    # ZeRO-Offload: 4 bytes per parameter of the own shard per step, 2 out and 2 in.
    assert (o["host_bpp"], o["device_bpp"]) == (1.75, 2.125)
    assert (o["d2h_gb"] + o["h2d_gb"]) / (7 / 8) == pytest.approx(4)
    # Weights too: 14 GB in for forward and again for backward, plus the own shard's update;
    # the gathered 14 GB go back out to the host copy.
    assert (w["host_bpp"], w["device_bpp"], w["d2h_gb"], w["h2d_gb"]) == (3.75, 0.25, 15.75, 29.75)


def test_microbatches_fp32_momentum_nodes_and_slots():
    args = ["--params=1e9", "--dp=16", "--ranks-per-node=4", "--grad-dtype=fp32", "--optimizer=momentum",
            "--microbatches=4", "--chunks=8", "--slots=3"]
    for mode in ("grads", "optimizer", "weights"):
        _, t = tables(*args, f"--offload={mode}")
        for stage, row in t[16].items():
            check(row, expected(stage, mode, 16, s=4, grad=4, moments=4, microbatches=4, slots=3, chunks=8),
                  1e9)
    # Four micro-batches send z2's FP32 shard out four times and bring it back once.
    assert t[16]["z2"]["d2h_gb"] == pytest.approx(4 * 4 / 16 + 2, abs=1e-3)


def test_without_offload_the_table_is_unchanged(tmp_path):
    plain = run("--params=7e9", "--dp=8", f"--json={tmp_path / 'a.json'}")
    assert plain.returncode == 0 and "offload" not in plain.stdout
    assert "host_bytes" not in (tmp_path / "a.json").read_text()


def test_json_rows_carry_the_printed_columns(tmp_path):
    path = tmp_path / "plan.json"
    _, t = tables("--params=7e9", "--dp=2,8", "--offload=optimizer", "--chunks=4", "--slots=1",
                  f"--json={path}")
    doc = json.loads(path.read_text())
    assert (doc["model"]["offload"], doc["model"]["slots"], doc["model"]["chunks"]) == ("optimizer", [1], 4)
    assert doc["model"]["microbatches"] == 1
    assert len(doc["rows"]) == 2 * len(STAGES)
    for r in doc["rows"]:
        row = t[r["dp"]][r["stage"]]
        assert r["host_bytes_per_param"] == pytest.approx(row["host_bpp"], abs=1e-4)
        assert r["device_bytes_per_param"] == pytest.approx(row["device_bpp"], abs=1e-4)
        assert r["device_saved_bytes"] == pytest.approx(r["bytes_per_gpu"] - r["device_bytes"])
        assert r["pcie_bytes_per_step"] == pytest.approx(r["d2h_bytes_per_step"] + r["h2d_bytes_per_step"])
        assert r["pcie_bytes_per_param"] == pytest.approx(r["pcie_bytes_per_step"] / r["params_per_gpu"])
        assert r["slot_bytes"] == pytest.approx(2 * r["params_per_gpu"] / 4)  # one BF16 slot of 1/4
        assert r["host_bytes"] == pytest.approx(r["host_bytes_per_param"] * r["params_per_gpu"])
        assert r["slots"] == 1


def test_a_list_of_slot_counts_gives_rows_for_each(tmp_path):
    # --slots is a list here as in zb_offload: a table and rows per slot count, each as the
    # count alone gives it.
    path = tmp_path / "plan.json"
    args = ["--params=7e9", "--dp=8", "--offload=grads", "--chunks=4"]
    text, _ = tables(*args, "--slots=1,3", f"--json={path}")
    assert "1 device slot(s)" in text and "3 device slot(s)" in text
    doc = json.loads(path.read_text())
    assert doc["model"]["slots"] == [1, 3]
    assert [r["slots"] for r in doc["rows"]] == [1] * len(STAGES) + [3] * len(STAGES)
    for slots in (1, 3):
        alone = tmp_path / f"alone{slots}.json"
        tables(*args, f"--slots={slots}", f"--json={alone}")
        assert [r for r in doc["rows"] if r["slots"] == slots] == json.loads(alone.read_text())["rows"]


BAD = [(["--offload=gpu"], "--offload"), (["--offload=grads", "--slots=0"], "--slots"),
       (["--slots=3"], "--slots"), (["--chunks=4"], "--chunks"),
       (["--offload=weights", "--chunks=0"], "--chunks"), (["--offload=grads", "--slots=1,1"], "given twice")]


def test_bad_offload_flags_exit_2_with_one_line():
    rows = [(["--params=7e9", "--dp=8", *args], want) for args, want in BAD]
    assert not bad_flag_failures("zb_plan", rows)
