"""tools/predict_accuracy.py refuses bad input before it runs anything: one line, exit 2."""
import os
import subprocess
import sys

ROOT = os.environ.get("ZB_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "predict_accuracy.py")

BAD = [(["one-node", "--ranks=2,x"], "--ranks=2,x"),
       (["one-node", "--ranks=1"], "counts of 2 or more"),
       (["causes", "--reps=0"], "--reps 1 or more"),
       (["causes", "--reps=many"], "--reps"),
       (["sideways"], "sideways"),
       (["links", "--rates=1,x"], "--rates=1,x"),
       (["links", "--rates=1,0"], "above 0"),
       (["more-ranks", "--sweep-gbps=-1"], "above 0"),
       (["quantized", "--bracket=1"], "--bracket=1: a factor above 1"),
       (["quantized", "--bracket=x"], "--bracket"),
       (["one-node", "--sweep-flags=footprint=8M"], "each starting with --"),
       (["causes", "--bind=socket"], "--bind=socket: none or core"),
       (["one-node", "--bin=/no/such/dir"], "holds no zb_predict")]


def test_bad_input_is_one_line_and_exit_2():
    failures = []
    for args, want in BAD:
        proc = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, timeout=60)
        lines = proc.stderr.splitlines()
        if proc.returncode != 2 or proc.stdout or len(lines) != 1 or want not in lines[0] or \
                not lines[0].startswith("predict_accuracy.py: "):
            failures.append(f"{args}: rc {proc.returncode}, stderr {proc.stderr!r}")
    assert not failures
