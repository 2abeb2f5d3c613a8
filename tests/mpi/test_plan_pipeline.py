# zb_plan --microbatches against hand-computed pipeline layouts; runs the binary, no MPI launch.
import json
import os
import re
import subprocess

import pytest

from zbrun import bad_flag_failures

ZB_PLAN = os.path.join(os.environ.get("ZB_BIN", "build/bin"), "zb_plan")
COLUMNS = ["bytes_per_param", "gb_per_gpu", "grads_gb", "slots_gb", "volume_psi", "elements_per_step",
           "gb_per_step"]


def run(*args):
    return subprocess.run([ZB_PLAN, *args], capture_output=True, text=True, timeout=60)


def pipeline_tables(*args):
    """{dp: {strategy: {column: value}}} from the pipeline tables zb_plan prints."""
    res = run(*args)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    tables, current = {}, None
    for line in res.stdout.splitlines():
        m = re.match(r"pipeline, dp=(\d+): M=(\d+) micro-batches per step, (\d+) chunk", line)
        if m:
            current = tables.setdefault(int(m.group(1)), {})
            continue
        if re.match(r"dp=\d+ \(world", line):
            current = None  # the stage table that follows is not a pipeline one
        fields = line.split()
        if current is not None and fields and fields[0] in ("dp", "z1", "z2", "z3"):
            current[fields[0]] = dict(zip(COLUMNS, map(float, fields[1:])))
    return tables


def test_7b_over_8_with_8_microbatches_and_4_chunks():
    t = pipeline_tables("--params=7e9", "--dp=8", "--microbatches=8", "--chunks=4")[8]
    assert list(t) == ["dp", "z1", "z2"]  # z3 gathers its weights; not a pipeline strategy
    assert t["dp"]["gb_per_gpu"] == pytest.approx(112) and t["dp"]["grads_gb"] == pytest.approx(14)
    assert t["z1"]["gb_per_gpu"] == pytest.approx(7 * (4 + 12 / 8)) and t["z1"]["slots_gb"] == 0
    # z2: its shard (2/8 bytes per parameter) plus two slots of a quarter of the stage each.
    assert t["z2"]["slots_gb"] == pytest.approx(2 * 2 * 7 / 4)
    assert t["z2"]["grads_gb"] == pytest.approx(7 * 2 / 8 + 7)
    assert t["z2"]["gb_per_gpu"] == pytest.approx(7 * (2 + 14 / 8) + 7)
    for strategy, vol in (("dp", 2), ("z1", 2), ("z2", 9)):
        assert t[strategy]["volume_psi"] == pytest.approx(vol)
        # Ring: 7/8 of every pass, BF16 gradients and weights.
        assert t[strategy]["gb_per_step"] == pytest.approx(vol * 7 * 7 / 8 * 2, abs=1e-3)


def test_one_microbatch_costs_z2_no_more_traffic_and_fp32_gradients_weigh_in():
    t = pipeline_tables("--params=1e9", "--dp=4", "--microbatches=1", "--grad-dtype=fp32",
                        "--optimizer=momentum")[4]
    assert t["z2"]["volume_psi"] == t["z1"]["volume_psi"] == 2
    # z2 sends its gradients in FP32 once, then gathers BF16 weights: 3/4 of (4 + 2) GB.
    assert t["z2"]["gb_per_step"] == pytest.approx(0.75 * (4 + 2), abs=1e-3)
    assert t["z2"]["grads_gb"] == pytest.approx(1 + 2 * 4)  # one chunk: each slot is the stage


def test_a_bucket_smaller_than_a_chunk_sizes_the_slots():
    # pp=1, so a GPU's stage is the whole 7e9 in four chunks of 1.75e9 parameters; 64 MiB
    # buckets of BF16 gradients are 2^25 parameters, and each of z2's two slots holds one.
    t = pipeline_tables("--params=7e9", "--dp=8", "--microbatches=8", "--chunks=4", "--bucket-mb=64")[8]
    assert t["z2"]["slots_gb"] == pytest.approx(2 * 2 * 2**25 / 1e9, abs=1e-3)
    assert t["z2"]["grads_gb"] == pytest.approx(7 * 2 / 8 + 2 * 2 * 2**25 / 1e9, abs=1e-3)
    assert t["dp"]["slots_gb"] == t["z1"]["slots_gb"] == 0
    # A bucket larger than a chunk is cut at the chunk, as zb_pipeline's buckets are.
    big = pipeline_tables("--params=7e9", "--dp=8", "--microbatches=8", "--chunks=4", "--bucket-mb=1e6")[8]
    assert big["z2"]["slots_gb"] == pytest.approx(2 * 2 * 7 / 4)


def test_json_holds_the_pipeline_rows_as_printed(tmp_path):
    path = tmp_path / "plan.json"
    t = pipeline_tables("--params=7e9", "--dp=2,8", "--microbatches=4", "--chunks=2", f"--json={path}")
    doc = json.loads(path.read_text())
    # The stage tables are unchanged: every default stage once per data-parallel size.
    stages = {r["stage"] for r in doc["rows"]}
    assert {"dp", "z1", "z2", "z3"} <= stages
    assert sorted((r["stage"], r["dp"]) for r in doc["rows"]) == sorted((s, d) for s in stages for d in (2, 8))
    rows = {(r["stage"], r["dp"]): r for r in doc["pipeline"]}
    assert len(rows) == 6
    for (strategy, dp), r in rows.items():
        assert r["microbatches"] == 4 and r["chunks"] == 2
        assert r["gb_per_gpu"] == pytest.approx(t[dp][strategy]["gb_per_gpu"], abs=1e-3)
        assert r["volume_psi"] == t[dp][strategy]["volume_psi"]


BAD = [["--chunks=2"], ["--microbatches=4", "--stages=z3"], ["--microbatches=-1"], ["--bucket-mb=25"],
       ["--microbatches=4", "--bucket-mb=-1"]]


def test_bad_pipeline_flags_exit_2_with_one_line():
    assert not bad_flag_failures("zb_plan", [["--params=7e9", "--dp=8", *args] for args in BAD])
