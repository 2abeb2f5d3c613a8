"""Bad input to the prediction flags of issue 23 (zb_predict's --handoff-us, --link-gbps,
--exposed-limit, --node-links, --explain, --ranks beyond the sweep, nccl-tests JSON in
--sweep; zb_plan's --sweep column) and to its quantized configurations (--kernels), each row
one process without MPI: one line naming the problem, exit 2."""
import json
import os

from test_predict import sweep_doc
from zbrun import bad_flag_failures


def write(folder, name, doc):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def nccl_tests_doc(program="./all_reduce_perf", devices=1, results=None):
    """nccl-tests' -J layout (src/util.cu) at its smallest: the program, the config, one size."""
    results = results if results is not None else [
        {"size": 1048576, "count": 262144, "type": "float", "redop": "sum", "root": "    -1",
         "out_of_place": {"time": 40.0, "alg_bw": 1, "bus_bw": 1, "nwrong": 0},
         "in_place": {"time": 41.0, "alg_bw": 1, "bus_bw": 1, "nwrong": 0}}]
    return {"version": 2, "args": [program, "-J", "x.json"],
            "config": {"nthreads": 1, "ngpus": 1,
                       "devices": [{"rank": i, "hostname": "a"} for i in range(devices)]},
            "results": results}


def files(tmp):
    f = {"SWEEP": write(tmp, "sweep.json", sweep_doc(2)),
         "NODES": write(tmp, "nodes.json", dict(sweep_doc(2), context={"world_size": "2", "nodes": "2"})),
         "ONERANK": write(tmp, "one.json", sweep_doc(1)),
         "NCCL": write(tmp, "ar.json", nccl_tests_doc()),
         "BCAST": write(tmp, "bc.json", nccl_tests_doc(program="./broadcast_perf")),
         "NOTIME": write(tmp, "nt.json", nccl_tests_doc(results=[
             {"size": 1024, "type": "float", "out_of_place": {"time": "nan"}, "in_place": {"time": "nan"}}])),
         "NODEVICES": write(tmp, "nd.json", nccl_tests_doc(devices=0)),
         "NOTJSON": write(tmp, "bad.json", "{\"results\": ["),
         "NOTRACE": write(tmp, "zero.json", {"context": {"command_line": "zb_zero --params=1e6"}, "benchmarks": []})}
    return f


def rows(table, f):
    out = []
    for args, want in table:
        filled = []
        for a in args:
            for key, path in f.items():
                a = a.replace(key, path)
            filled.append(a)
        out.append((filled, want))
    return out


PREDICT = [
    (["--sweep=SWEEP", "--handoff-us=-1"], "--handoff-us"),
    (["--sweep=SWEEP", "--handoff-us=ten"], "--handoff-us"),
    (["--sweep=SWEEP", "--exposed-limit=0"], "--exposed-limit"),
    (["--sweep=SWEEP", "--exposed-limit=1.5"], "--exposed-limit"),
    (["--sweep=SWEEP", "--exposed-limit=x"], "--exposed-limit"),
    (["--sweep=NODES", "--link-gbps=10,x"], "'x' is not a rate"),
    (["--sweep=NODES", "--link-gbps=0"], "'0' is not a rate"),
    (["--sweep=NODES", "--link-gbps=-5"], "'-5' is not a rate"),
    (["--sweep=NODES", "--link-gbps=1e6"], "'1e6' is not a rate"),
    (["--sweep=NODES", "--link-gbps=10,"], "is not a rate"),
    (["--sweep=NODES", "--node-links=-1"], "--node-links"),
    (["--sweep=NODES", "--node-links=one"], "--node-links"),
    (["--sweep=SWEEP", "--link-gbps=10"], "on one node"),                     # nothing between nodes to set
    (["--sweep=ONERANK", "--ranks=4", "--ranks-per-node=2", "--link-gbps=10"], "a sweep over more than one rank"),
    (["--sweep=SWEEP", "--stages=zpp"], "needs --kernels=FILE"),              # zpp always quantizes
    (["--sweep=SWEEP", "--stages=z3", "--quantize-weights=int8"], "needs --kernels=FILE"),
    (["--sweep=SWEEP", "--stages=z3", "--quantize-grads=int4", "--kernels=/no/such.json"], "/no/such.json"),
    (["--sweep=SWEEP", "--stages=z3", "--quantize-weights=fp8", "--kernels=SWEEP"], "no kernel zb_predict prices"),
    (["--sweep=SWEEP", "--stages=z2", "--quantize-grads=int4", "--microbatches=2"], "quantize nothing"),
    (["--sweep=SWEEP", "--explain"], "give --measured"),
    (["--sweep=SWEEP", "--explain", "--measured=NOTRACE", "--stages=dp"], "names no trace of dp"),
    (["--sweep=SWEEP", "--explain", "--measured=NOTRACE", "--microbatches=2", "--stages=dp"], "--microbatches"),
    (["--sweep=NCCL,NCCL"], "give one of them"),                               # all_reduce twice
    (["--sweep=BCAST"], "broadcast_perf"),
    (["--sweep=NOTIME"], "has no time"),
    (["--sweep=NODEVICES"], "rank count is unknown"),
    (["--sweep=NOTJSON"], "--sweep"),
    (["--sweep=SWEEP,/no/such.json"], "/no/such.json"),
]

PLAN = [
    (["--params=7e9", "--dp=8", "--sweep=/no/such.json"], "/no/such.json"),
    (["--params=7e9", "--dp=8", "--sweep=BCAST"], "broadcast_perf"),
    (["--params=7e9", "--dp=8", "--sweep=SWEEP", "--compute=gemm:64"], "--compute=gemm"),
    (["--params=7e9", "--dp=8", "--sweep=SWEEP", "--compute=nap:5"], "--compute"),
    (["--params=7e9", "--dp=8", "--sweep=SWEEP", "--layers=0"], "--layers"),
    (["--params=7e9", "--dp=8", "--sweep=SWEEP", "--exposed-limit=0"], "--exposed-limit"),
    (["--params=7e9", "--dp=8", "--sweep=SWEEP", "--handoff-us=-3"], "--handoff-us"),
    (["--params=7e9", "--dp=8", "--compute=sleep:100"], "give --sweep too"),
    (["--params=7e9", "--dp=8", "--layers=8"], "give --sweep too"),
    (["--params=7e9", "--dp=8", "--exposed-limit=0.1"], "give --sweep too"),
    (["--params=7e9", "--dp=8", "--handoff-us=5"], "give --sweep too"),
    (["--params=7e9", "--dp=8", "--node-links=1"], "give --sweep too"),
    (["--params=7e9", "--dp=8", "--sweep=SWEEP", "--node-links=-2"], "--node-links"),
]


def test_zb_predict_refuses_bad_prediction_flags_in_one_line(tmp_path):
    assert not bad_flag_failures("zb_predict", rows(PREDICT, files(str(tmp_path))))


def test_zb_plan_refuses_bad_link_column_flags_in_one_line(tmp_path):
    assert not bad_flag_failures("zb_plan", rows(PLAN, files(str(tmp_path))))
