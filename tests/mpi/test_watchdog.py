"""Every wait of the driver's own is under the watchdog: a rank that stops (SIGSTOP, planted
with --fault-stall at its first wait of one kind) ends the job after --timeout with one line
naming the wait and the rank that never arrived, and a non-zero exit, never a hang. The
subprocess timeout is only a backstop; nothing here reads a clock."""

import os
import tempfile

import pytest

from zbrun import mpirun

# A short run of each program that passes every kind of wait.
COLLECTIVES = ["zb_collectives", ["--ops=all_reduce", "--min-bytes=4K", "--max-bytes=4K",
                                  "--iters=1", "--warmup=0", "--no-bare"]]
ZERO = ["zb_zero", ["--params=1000", "--layers=2", "--stages=dp", "--iters=1", "--warmup=0",
                    "--no-check"]]

# (fault's wait, program, the phrase the line names the wait by)
WAITS = [
    ("barrier", COLLECTIVES, "the driver's barrier"),
    ("reduction", COLLECTIVES, "the driver's reduction"),
    ("fence", COLLECTIVES, "the driver's node-window fence"),
    ("trace", ZERO, "the driver's trace gathering"),
    ("final", COLLECTIVES, "the driver's final reduction"),
]


def timeout_s(program):
    """--timeout for the run. zb_zero's steps run their collectives on the communication thread,
    which shares both cores with the suite's other jobs: there a step's 2 KB all-reduce once
    outlasted 2 s before the stalled wait was reached (the timeout then named that all-reduce;
    the thread ran at idle priority then). zb_collectives calls on the rank's own thread."""
    return 20 if program == "zb_zero" else 2


def stalled(np, program, args, stall):
    """Runs with RANK:WAIT stalled; returns the process and its lines of our own on stderr."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = [f"--trace={os.path.join(tmp, 't.json')}"] if program == "zb_zero" else []
        proc = mpirun(np, program, [*args, *trace, f"--timeout={timeout_s(program)}", f"--fault-stall={stall}"],
                      mca=["--bind-to", "none"], timeout=120)
    ours = [l for l in proc.stderr.splitlines() if l.startswith(f"{program}: ")]
    return proc, ours


@pytest.mark.parametrize("kind,run,phrase", WAITS, ids=[w[0] for w in WAITS])
def test_a_rank_stopped_at_a_wait_is_named_by_rank_0(kind, run, phrase):
    program, args = run
    proc, ours = stalled(2, program, args, f"1:{kind}")
    assert proc.returncode != 0
    assert len(ours) == 1, proc.stderr
    assert f"{program}: error: timeout: rank 0: {phrase} (" in ours[0], ours[0]
    assert ours[0].endswith(f"did not complete within {timeout_s(program)} s: rank 1 had not arrived"), ours[0]


def test_a_stopped_rank_0_is_named_by_the_others_once():
    # Rank 0 gathers every wait; when it is the one missing, rank 1 says so for every rank.
    program, args = COLLECTIVES
    proc, ours = stalled(3, program, args, "0:reduction")
    assert proc.returncode != 0
    assert len(ours) == 1, proc.stderr
    assert ours[0].startswith(f"{program}: error: timeout: rank 1: the driver's reduction ("), \
        ours[0]
    assert ours[0].endswith("rank 0 had not arrived"), ours[0]
