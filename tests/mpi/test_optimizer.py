"""zb_optimizer: the optimizer step of every stage at 2 and 4 ranks ends with the reference's
state bit for bit; the kernel and quantization benchmarks report their counters; bad flags
exit 2."""
import math

import pytest

from zbrun import bad_flag_failures, benchmarks, run_json, run_single

STAGES = ["dp", "z1", "z2", "z3", "hsdp", "hpz"]
OPTIMIZERS = ["adam", "momentum"]
GRADS = ["bf16", "fp32"]
# Bytes moved per parameter by the kernels' stated model (kernels/optimizer.h).
BYTES = {("adam", "bf16"): 28, ("adam", "fp32"): 30, ("momentum", "bf16"): 20,
         ("momentum", "fp32"): 22,
         # The synthetic gradient reads the BF16 weight and writes the gradient.
         ("synthetic_grad", "bf16"): 4, ("synthetic_grad", "fp32"): 6}
# Ψ not divisible by 2 or 4 and three buckets: every sharded collective is padded.
STEP = ["--parts=step", "--step-params=100003", "--buckets=3", "--iters=2", "--warmup=1"]


def padding(params, buckets, np):
    """Equal buckets (the remainder one each over the first), each padded to a multiple of np."""
    q, r = divmod(params, buckets)
    return sum((-(q + (i < r))) % np for i in range(buckets))


def segments(name):
    """'opt_step/stage:z1/params:9/grad:bf16' -> {'family': 'opt_step', 'stage': 'z1', ...}"""
    head, *rest = name.split("/")
    return dict([("family", head)] + [tuple(p.split(":", 1)) for p in rest])


@pytest.mark.parametrize("np", [2, 4])
def test_every_stage_matches_the_reference(np):
    data, proc = run_json(np, "zb_optimizer", STEP)
    rows = benchmarks(data)
    want = {f"opt_step/stage:{s}/params:100003/optimizer:{o}/grad:{g}"
            for o in OPTIMIZERS for g in GRADS for s in STAGES}
    assert set(rows) == want, proc.stdout
    for name, b in rows.items():
        seg = segments(name)
        assert b["wrong"] == 0, (name, proc.stdout)
        assert b["ranks"] == np and b["params"] == 100003
        assert b["padding"] == (0 if seg["stage"] == "dp" else padding(100003, 3, np)), name
        for part in ("reduce_s", "update_s", "step_s"):
            assert b[part] > 0, (name, part)
        assert b["step_s"] == pytest.approx(b["reduce_s"] + b["update_s"] + b["gather_s"], rel=1e-12)
        # dp and the stages that shard weights gather nothing here; z1 and z2 gather the
        # BF16 weights they hold whole.
        assert (b["gather_s"] > 0) == (seg["stage"] in ("z1", "z2")), name
        assert math.isfinite(b["update_GBps"]) and b["update_GBps"] > 0
    assert "# zb_optimizer" in proc.stdout and "reduce(ms)" in proc.stdout


def test_a_corrupted_gradient_fails_the_check():
    data, proc = run_json(2, "zb_optimizer", [*STEP, "--kernels=adam", "--grad-dtype=bf16",
                                              "--fault-corrupt=1"], expect_rc=1)
    rows = benchmarks(data)
    assert len(rows) == len(STAGES)
    for name, b in rows.items():
        assert b["wrong"] >= 1, name
    assert "differ from the reference" in proc.stderr


def test_kernel_benchmarks_report_bandwidth_against_the_fastest_probe():
    # 64K and 256K: parameter counts are decimal.
    data, proc = run_json(1, "zb_optimizer", ["--parts=kernels", "--min-params=64K",
                                              "--max-params=256K", "--iters=2", "--warmup=1"])
    rows = benchmarks(data)
    # Each optimizer's update and the synthetic gradient zb_predict --kernels prices backward with.
    want = {f"{o}/params:{p}/grad:{g}/impl:cpu"
            for o in OPTIMIZERS + ["synthetic_grad"] for g in GRADS for p in (64000, 256000)}
    assert set(rows) == want, proc.stdout
    for name, b in rows.items():
        seg = segments(name)
        assert b["params"] == int(seg["params"])
        assert b["bytes_per_param_moved"] == BYTES[(seg["family"], seg["grad"])]
        for c in ("params_per_s", "GBps", "limit_GBps", "frac_of_limit"):
            assert math.isfinite(b[c]) and b[c] > 0, (name, c)
        assert b["GBps"] == pytest.approx(b["params"] * b["bytes_per_param_moved"] / b["kernel_s"] / 1e9)
        assert b["frac_of_limit"] == pytest.approx(b["GBps"] / b["limit_GBps"])
        # The limit is the best of every probe, each measured in the same run.
        probes = [b[f"{p}_GBps"] for p in ("copy", "copy_plain", "triad", "rmw")]
        assert all(math.isfinite(p) and p > 0 for p in probes), name
        assert b["limit_GBps"] == max(probes), name
        assert b["label"] == "limit: " + ("copy", "copy_plain", "triad", "rmw")[probes.index(max(probes))]
        assert b["rank_spread"] == 0, name  # one rank is its own fastest and slowest
        # What zb_predict prices the step's kernel at: the back-to-back loop's mean, the time
        # the benchmark reports.
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        assert b["side_by_side_s"] == pytest.approx(b["real_time"] * unit, rel=1e-6), name
    assert "limit GB/s" in proc.stdout


def quant_bytes(kernel, fmt, elem, block, inputs):
    """Bytes per element by the quantization kernels' model (kernels/quantize/quantize.h)."""
    code = 0.5 if fmt == "int4" else 1.0
    scale = 0.0 if fmt == "fp8" else 4 / block
    if kernel == "quantize":
        return 2 * elem + 1 if fmt == "fp8" else elem + code + scale
    if kernel == "dequantize":
        return code + scale + elem
    return (inputs + 1) * (code + scale)


@pytest.mark.parametrize("np", [1, 2])
def test_quantization_kernels_report_bandwidth_against_the_fastest_probe(np):
    data, proc = run_json(np, "zb_optimizer", ["--parts=quantize", "--min-params=65536",
                                               "--max-params=65536", "--iters=2", "--warmup=1"])
    rows = benchmarks(data)
    # ZeRO++'s block of 4096 for INT8 (qwZ) and INT4 (qgZ); FP8 scales the whole tensor; the
    # reduction sums 8 inputs.
    formats = ["format:int8/block:4096", "format:int4/block:4096", "format:fp8"]
    want = {f"{k}/params:65536/{f}/dtype:{d}/impl:cpu"
            for k in ("quantize", "dequantize") for f in formats for d in GRADS}
    want |= {f"reduce_requantize/params:65536/{f}/inputs:8/impl:cpu" for f in formats[:2]}
    assert set(rows) == want, proc.stdout
    for name, b in rows.items():
        seg = segments(name)
        elem = {"bf16": 2, "fp32": 4}.get(seg.get("dtype"), 0)
        model = quant_bytes(seg["family"], seg["format"], elem, int(seg.get("block", 1)),
                            int(seg.get("inputs", 0)))
        assert b["ranks"] == np and b["params"] == 65536
        assert b["bytes_per_param_moved"] == pytest.approx(model, rel=1e-12), name
        for c in ("params_per_s", "GBps", "limit_GBps", "frac_of_limit"):
            assert math.isfinite(b[c]) and b[c] > 0, (name, c)
        assert b["GBps"] == pytest.approx(b["params"] * model / b["kernel_s"] / 1e9)
        assert b["frac_of_limit"] == pytest.approx(b["GBps"] / b["limit_GBps"])
        probes = [b[f"{p}_GBps"] for p in ("copy", "copy_plain", "triad", "rmw")]
        assert b["limit_GBps"] == max(probes), name
        # What the fastest rank's median saves of the slowest's: none with one rank.
        assert (b["rank_spread"] == 0) if np == 1 else (0 <= b["rank_spread"] < 1), name
    assert "quantization kernels" in proc.stdout and "reduce_requantize" in proc.stdout


BAD = [["--kernels=lamb"], ["--grad-dtype=fp16"], ["--stages=z4"], ["--parts=all"],
       (["--min-params=2M", "--max-params=1M"], "(2000000) is larger than --max-params (1000000)"),
       ["--min-params=0"], ["--step-params=0"], ["--buckets=0"], ["--step-params=3", "--buckets=4"],
       ["--step-factor=0.5"], ["--bogus"], (["--step-params=1.5"], "whole number"),
       (["--min-params=128Mi"], "--min-params")]


def test_bad_flags_exit_2_with_one_line_before_mpi():
    assert not bad_flag_failures("zb_optimizer", BAD)


def test_help_documents_every_flag():
    proc = run_single("zb_optimizer", ["--help"])
    assert proc.returncode == 0
    for flag in ("--parts", "--kernels", "--grad-dtype", "--min-params", "--max-params",
                 "--step-factor", "--stages", "--step-params", "--buckets", "--check"):
        assert flag in proc.stdout, flag
