"""tools/ab.sh and the run_all.sh hooks it uses: bad input, the plan before the builds, and no
worktree left behind on a failed build or an interrupt. (A whole A/B run is a benchmark,
measured in the README; run_all.sh's bad option values are in tests/tools/.)"""

import json
import os
import signal
import subprocess
import time

import pytest

from results_fixture import ROOT

AB = os.path.join(ROOT, "tools", "ab.sh")
BIN = os.environ.get("ZB_BIN") or os.path.join(ROOT, "build", "bin")
IS_GIT = subprocess.run(["git", "-C", ROOT, "rev-parse", "--git-dir"],
                        capture_output=True).returncode == 0


def run(cmd, tmp_path, **kw):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=600,
                          **kw)


def worktrees_in(folder):
    """The repository's worktrees inside folder (where the test pointed TMPDIR)."""
    out = subprocess.run(["git", "-C", ROOT, "worktree", "list", "--porcelain"],
                         capture_output=True, text=True).stdout
    paths = [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("worktree ")]
    return [p for p in paths if os.path.realpath(p).startswith(os.path.realpath(folder))]


@pytest.mark.parametrize("args", [
    [], ["a", "b", "c"], ["--pairs=4", "HEAD"], ["--pairs=x", "HEAD"], ["--only=plot", "HEAD"],
    ["--b-args=collective=--x", "HEAD"], ["--a-args=zero", "HEAD"], ["--nope", "HEAD"],
    ["HEAD", "--", "--out=x"], ["HEAD", "--", "--extra-args=zero=--x"], ["--build=a/b", "HEAD"],
    ["HEAD", "--", "--nope"], ["HEAD", "--", "--quick", "--full"],
])
def test_bad_options_exit_2_with_one_line(tmp_path, args):
    r = run([AB] + args, tmp_path)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("ab.sh: "), r.stderr


@pytest.mark.skipif(not IS_GIT, reason="not a git checkout")
def test_unknown_revision_exits_2(tmp_path):
    r = run([AB, "no-such-revision-here"], tmp_path)
    assert r.returncode == 2 and "not a revision" in r.stderr


@pytest.mark.skipif(not IS_GIT, reason="not a git checkout")
def test_failed_build_leaves_no_worktree(tmp_path):
    r = run([AB, "--cmake=-DCMAKE_CXX_COMPILER=/nonexistent/c++", "--build=build-ab-test",
             f"--out={tmp_path / 'out'}", "HEAD"], tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "A does not build" in r.stderr
    # The plan and its estimate came before anything was built: 8 pairs x 2 sides.
    plan = r.stderr.index("plan: ")
    assert plan < r.stderr.index("building A") and "x 16 runs of the suite: about" in r.stderr
    assert worktrees_in(tmp_path) == []
    assert not [p for p in os.listdir(tmp_path) if p.startswith("zb_ab.")]


@pytest.mark.skipif(not IS_GIT, reason="not a git checkout")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_leaves_no_worktree(tmp_path, sig):
    # A compiler that says it started and then hangs: the build is under way when we stop it.
    started = tmp_path / "started"
    fake = tmp_path / "hanging_cxx"
    fake.write_text(f"#!/bin/sh\ntouch {started}\nexec sleep 600\n")
    fake.chmod(0o755)
    env = dict(os.environ, TMPDIR=str(tmp_path))
    p = subprocess.Popen([AB, f"--cmake=-DCMAKE_CXX_COMPILER={fake}", "--build=build-ab-test",
                          f"--out={tmp_path / 'out'}", "HEAD"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    while not started.exists() and p.poll() is None:
        time.sleep(0.1)  # waits for an event; the pass/fail below reads no clock
    assert p.poll() is None, p.communicate()
    os.killpg(p.pid, sig)  # as a terminal's ^C or a CI cancel reaches the whole group
    p.communicate(timeout=120)
    assert p.returncode != 0
    assert worktrees_in(tmp_path) == []
    assert not [x for x in os.listdir(tmp_path) if x.startswith("zb_ab.")]


@pytest.mark.skipif(not os.access(os.path.join(BIN, "zb_collectives"), os.X_OK),
                    reason="zb_collectives not built")
def test_run_all_extra_args_reach_one_run_only(tmp_path):
    out = tmp_path / "run"
    r = run([os.path.join(ROOT, "run_all.sh"), f"--bin={BIN}", "--only=collectives,plan",
             "--quick", "--no-figures", f"--out={out}",
             "--extra-args=collectives=--fault-slow=all_reduce:0.2"], tmp_path)
    assert r.returncode == 0, r.stderr
    runs = {x["name"]: x for x in json.loads((out / "manifest.json").read_text())["runs"]}
    assert runs["collectives"]["command"].endswith(" --fault-slow=all_reduce:0.2")
    assert "fault-slow" not in runs["plan"]["command"]
    assert "figures: skipped" in r.stderr and not (out / "figures").exists()
    assert f"binaries from {os.path.abspath(BIN)} (not building)" in r.stderr


@pytest.mark.skipif(not os.access(os.path.join(BIN, "zb_zero"), os.X_OK), reason="zb_zero not built")
@pytest.mark.parametrize("value", ["z9:0.1", "z2:0", "z2", "z2:x", "z2:101", ":0.1"])
def test_bad_fault_slow_stage_exits_2_with_one_line(tmp_path, value):
    # The planted stage slowdown of tools/ab_trials.py: a typo must stop the run, not plant
    # nothing (a trial would then count a miss that is not the gate's).
    r = run([os.path.join(BIN, "zb_zero"), f"--fault-slow-stage={value}"], tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("zb_zero: --fault-slow-stage takes STAGE:FRACTION, STAGE one of dp,")
    assert r.stderr.endswith(f"and FRACTION in (0, 100], not '{value}'\n") and r.stderr.count("\n") == 1
