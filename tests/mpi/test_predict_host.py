"""The host's speed: zb_predict against a step measured at another host speed than its sweep
(zb_zero's reference collective, reference_s, held against a crafted sweep's, at the same speed,
at three times it, and against a sweep whose own speed changed halfway); and --host-tries, which
runs a repetition again where the host changed speed under it."""
import subprocess
import tempfile

import pytest

from test_predict import MODEL, predict, sweep_doc, write
from zbrun import ENV, benchmarks, binary, run_json


def test_a_step_measured_at_another_host_speed_than_the_sweep_is_named():
    """A sweep whose reference collective took as long as a step's prices it on the same host;
    one three times as slow does not, and the console names the stages."""
    with tempfile.TemporaryDirectory() as tmp:
        real, proc = run_json(2, "zb_zero", [*MODEL, "--stages=dp,z3", "--iters=2", "--warmup=1", "--no-check"])
        steps = benchmarks(real)
        reference = min(b["reference_s"] for b in steps.values())
        write(tmp, "real.json", real)
        for factor in (1, 3):
            doc = sweep_doc(2)
            for row in doc["benchmarks"]:
                row["reference_s"] = reference * factor
            pred, proc = predict(write(tmp, f"sweep{factor}.json", doc),
                                 [*MODEL, "--stages=dp,z3", f"--measured={tmp}/real.json"])
            line = [x for x in proc.stdout.splitlines() if x.startswith("# host: the reference collective")]
            assert len(line) == 1 and "0 of them more than 1.5x away" in line[0], proc.stdout
            for name, b in benchmarks(pred).items():
                # Within 1.5x either way is one speed: the fastest step's own at factor 1, none of
                # them at 3 unless this host itself changed speed between the two stages' steps.
                ratio = steps[name]["reference_s"] / (reference * factor)
                same = 1 / 1.5 <= ratio <= 1.5
                assert b["reference_ratio"] == pytest.approx(ratio), name
                assert b["host_steady"] == (1 if same else 0), name
                assert (f"{name.split('/')[1][6:]} {ratio:.2f}x" in line[0]) == (not same), line[0]
            assert factor == 1 or "steps measured at another speed" in line[0], line[0]
            assert pred["context"]["sweep_host_speed"].startswith("steady: the reference collective"), pred["context"]
        doc = sweep_doc(2)  # its second half four times as slow: it changed speed, no stage is steady
        for i, row in enumerate(doc["benchmarks"]):
            row["reference_s"] = reference * (4 if 2 * i >= len(doc["benchmarks"]) else 1)
        pred, _ = predict(write(tmp, "mixed.json", doc), [*MODEL, "--stages=dp,z3", f"--measured={tmp}/real.json"])
        assert pred["context"]["sweep_host_speed"].startswith("changed"), pred["context"]
        assert all(b["host_steady"] == 0 for b in benchmarks(pred).values())


def test_a_repetition_the_host_slowed_under_is_run_again():
    """--fault-slow-reference=1 makes the reference collective after the first try of the first
    repetition read ten times as long, as if the host had slowed during it: with two tries
    allowed that repetition runs exactly twice; with one, once, and no host_tries is written."""
    args = ["--ops=all_reduce", "--min-bytes=4K", "--max-bytes=4K", "--iters=2", "--warmup=1",
            "--benchmark_repetitions=2", "--fault-slow-reference=1"]
    out, _ = run_json(2, "zb_collectives", [*args, "--host-tries=2"])
    rows = [b for b in out["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
    assert len(rows) == 2 and rows[0]["host_tries"] == 2, rows
    assert rows[1]["host_tries"] in (1, 2), rows  # 2 only where this host itself moved
    out, _ = run_json(2, "zb_collectives", [*args, "--host-tries=1"])
    assert not any("host_tries" in b for b in out["benchmarks"]), out["benchmarks"]
    bad = subprocess.run([binary("zb_zero"), "--host-tries=0"], env=ENV, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0, bad.stderr
    assert "--host-tries" in bad.stderr, bad.stderr
