"""The predictor's accuracy tables on tools/cluster.sh (root): other link rates, more ranks,
and a quantized configuration's crossing, each predicted from one sweep
(tools/predict_accuracy.py links, more-ranks, quantized)."""
import json
import math
import os
import statistics
import subprocess
import sys

from predict_accuracy_common import CLUSTER, CLUSTER_NAME, KERNEL_RATES, ROOT, STAGES, die, rows, run

# The cluster tables: links that set the time, compute that hides most of it.
LINK_MODEL = ["--params=8e6", "--layers=16", "--bucket-mb=2"]
LINK_COMPUTE = "--compute=sleep:5000"


def on_cluster(nodes, per_node, gbps, work):
    """Runs work() on a cluster of nodes x per_node ranks, links at gbps; always taken down."""
    up = [CLUSTER, "up", f"--name={CLUSTER_NAME}", f"--nodes={nodes}", f"--ranks-per-node={per_node}"]
    proc = subprocess.run(up + ([f"--link-gbps={gbps}"] if gbps else []), capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"predict_accuracy.py: {' '.join(up)}: {proc.stderr.strip()}", file=sys.stderr)
        sys.exit(1)
    try:
        work()
    finally:
        subprocess.run([CLUSTER, "down", f"--name={CLUSTER_NAME}"], capture_output=True)


def cluster_sweep(a, path, groups="world,node,cross"):
    run(a, 0, "zb_collectives", [f"--groups={groups}", "--progress=thread", "--serial", "--min-bytes=64K",
                                 "--max-bytes=8M", "--step-factor=2", "--iters=5", "--warmup=2",
                                 f"--json={path}"], cluster=True)


def cluster_sweep_and_kernels(a, sweep, kernels):
    """The sweep and the kernels' rates (as the default run times them) on the cluster's ranks."""
    cluster_sweep(a, sweep)
    run(a, 0, "zb_optimizer", [*KERNEL_RATES, f"--json={kernels}"], cluster=True)


def cluster_zero(a, path, compute, stages=()):
    run(a, 0, "zb_zero", [*LINK_MODEL, compute, "--overlap=on", "--iters=5", "--warmup=2", "--no-check",
                          *([f"--stages={','.join(stages)}"] if stages else []), f"--json={path}"],
        cluster=True)


def rate_key(gbps):
    """A link rate as zb_predict is given it and prints it back, for looking its rows up."""
    return f"{float(gbps):.6g}"


def cluster_predict(a, sweep, kernels, config, rates, path):
    """zb_predict from the cluster's sweep and kernels' rates, at each link rate; its results."""
    run(a, 0, "zb_predict", [f"--sweep={sweep}", f"--kernels={kernels}", *config,
                             "--link-gbps=" + ",".join(rate_key(r) for r in rates), f"--json={path}"])
    with open(path) as f:
        return json.load(f)


def links(a, tmp):
    """2 nodes x 1: the sweep and the kernels' rates at --sweep-gbps predict each --rates, and each
    stage's required_link_gbps; each rate measured, then each stage at its predicted rate divided
    and multiplied by --bracket (the median of --reps each), to see its exposed share cross the
    limit zb_predict took (--exposed-limit)."""
    sweep, kernels = os.path.join(tmp, "links_sweep.json"), os.path.join(tmp, "links_kernels.json")
    on_cluster(2, 1, a.sweep_gbps, lambda: cluster_sweep_and_kernels(a, sweep, kernels))

    def predict(rates, path):
        doc = cluster_predict(a, sweep, kernels, [*LINK_MODEL, LINK_COMPUTE, "--overlap=on"], rates, path)
        # The share of the step behind required_link_gbps, as zb_predict took it.
        limit = float(doc["context"]["exposed_limit"])
        return limit, {(b["name"].split("stage:")[1].split("/")[0], rate_key(b["link_gbps"])): b
                       for b in doc["benchmarks"]}

    def measure(rate, stages, name):
        """{stage: (median step_s, median exposed share)} over --reps runs at `rate`."""
        paths = [os.path.join(tmp, f"{name}_{rep}.json") for rep in range(a.reps)]

        def work():
            for path in paths:
                cluster_zero(a, path, LINK_COMPUTE, stages)
        on_cluster(2, 1, rate, work)
        got = [rows(path) for path in paths]
        return {s: (statistics.median(g[s]["step_s"] for g in got),
                    statistics.median(g[s]["exposed_comm_s"] / g[s]["step_s"] for g in got))
                for s in stages if all(s in g for g in got)}

    limit, predicted = predict(a.rates, os.path.join(tmp, "links_predict.json"))
    measured = {r: measure(r, STAGES, f"links_zero_{r:g}") for r in a.rates}
    print(f"sweep and kernels at {a.sweep_gbps:g} Gbit/s; measured: the median of {a.reps}; "
          "exposed share: exposed_comm_s / step_s")
    print("| stage | Gbit/s | step measured (ms) | step predicted (ms) | error | exposed share | required Gbit/s |")
    print("|---|---|---|---|---|---|---|")
    for stage in STAGES:
        for r in a.rates:
            m, p = measured[r].get(stage), predicted.get((stage, rate_key(r)))
            if not m or not p:
                continue
            step, share = m
            print(f"| {stage} | {r:g} | {step * 1e3:.1f} | {p['step_s_predicted'] * 1e3:.1f} "
                  f"| {p['step_s_predicted'] / step - 1:+.1%} | {share:.1%} | {p['required_link_gbps']:.3g} |")
    print()
    print(f"each stage measured {a.bracket:g} times below and above its predicted required_link_gbps "
          f"(exposed under {limit * 100:.3g}% of the step)")
    print("| stage | required Gbit/s | below: Gbit/s, exposed share | above: Gbit/s, exposed share "
          "| crosses between |")
    print("|---|---|---|---|---|")
    for stage in STAGES:
        p = predicted.get((stage, rate_key(a.rates[0])))
        if not p:
            continue
        need = p["required_link_gbps"]
        if not 0 < need < 1e5:
            print(f"| {stage} | {need:.3g} | | | no rate to bracket |")
            continue
        lo, hi = need / a.bracket, need * a.bracket
        below = measure(lo, [stage], f"below_{stage}").get(stage, (0, math.nan))[1]
        above = measure(hi, [stage], f"above_{stage}").get(stage, (0, math.nan))[1]
        crosses = "yes" if below >= limit > above else "no"
        # Two decimals: a share just over the limit printed as "5.0%" beside "no" reads as a miss
        # at the limit itself.
        print(f"| {stage} | {need:.3g} | {lo:.3g}, {below:.2%} | {hi:.3g}, {above:.2%} | {crosses} |")


def more_ranks(a, tmp):
    """A sweep on 2 nodes x 1 (and one of one node's 2 ranks for the intra-node link) predicts
    4 x 1 and 2 x 2, each then measured --reps times (the median). The cluster's nodes have
    one link each, which a node's ranks share (zb_predict --node-links=1)."""
    inter, intra = os.path.join(tmp, "ranks_inter.json"), os.path.join(tmp, "ranks_intra.json")
    on_cluster(2, 1, a.sweep_gbps, lambda: cluster_sweep(a, inter))
    on_cluster(1, 2, None, lambda: cluster_sweep(a, intra, "world"))
    print(f"sweep on 2 x 1 at {a.sweep_gbps} Gbit/s and on 1 x 2; compute none: comm_s is the step; "
          f"measured: the median of {a.reps}")
    print("| nodes x ranks | stage | comm_s measured (ms) | predicted (ms) | comm_error |")
    print("|---|---|---|---|---|")
    for nodes, per_node in ((4, 1), (2, 2)):
        zeros = [os.path.join(tmp, f"ranks_zero_{nodes}x{per_node}_{rep}.json") for rep in range(a.reps)]
        pred = os.path.join(tmp, f"ranks_predict_{nodes}x{per_node}.json")

        def measure():
            for path in zeros:
                cluster_zero(a, path, "--compute=none")
        on_cluster(nodes, per_node, a.sweep_gbps, measure)
        run(a, 0, "zb_predict", [f"--sweep={inter},{intra}", *LINK_MODEL, "--compute=none", "--overlap=on",
                                 "--ranks=4", f"--ranks-per-node={per_node}", "--node-links=1",
                                 f"--json={pred}"])
        measured = [rows(path) for path in zeros]
        for stage, b in rows(pred).items():
            comm = statistics.median(m[stage]["comm_s"] for m in measured)
            print(f"| {nodes} x {per_node} | {stage} | {comm * 1e3:.1f} "
                  f"| {b['comm_s_predicted'] * 1e3:.1f} | {b['comm_s_predicted'] / comm - 1:+.1%} |")


def quantized(a, tmp):
    """2 nodes x 1: from a sweep at --sweep-gbps and the kernels' rates measured there, the rate
    below which z3 with INT8 gathers beats z3; both measured at that rate divided and multiplied
    by --bracket."""
    sweep, kernels = os.path.join(tmp, "q_sweep.json"), os.path.join(tmp, "q_kernels.json")
    on_cluster(2, 1, a.sweep_gbps, lambda: cluster_sweep_and_kernels(a, sweep, kernels))
    config = [*LINK_MODEL, LINK_COMPUTE, "--overlap=on", "--stages=z3", "--quantize-weights=none,int8"]

    def predict(rates, path):
        return {(b["name"].split("/")[2].startswith("quantize_weights"), rate_key(b["link_gbps"])): b
                for b in cluster_predict(a, sweep, kernels, config, rates, path)["benchmarks"]}
    cross = next(b for (q, _), b in predict([a.sweep_gbps], os.path.join(tmp, "q_cross.json")).items()
                 if q)["beats_unquantized_below_gbps"]
    if not 0 < cross < 1e5:
        die(f"z3+qw:int8 is predicted faster {'nowhere' if cross != cross else 'everywhere'}: no crossing to measure")
    rates = [cross / a.bracket, cross * a.bracket]
    predicted = predict(rates, os.path.join(tmp, "q_predict.json"))
    if a.out:
        # The figure of the step against the link rate, crossing marked, from this cluster's sweep.
        os.makedirs(a.out, exist_ok=True)
        grid = os.path.join(a.out, "predict_quantized.json")
        predict([cross * 2.0 ** (k / 2) for k in range(-4, 5)], grid)
        subprocess.run([sys.executable, os.path.join(ROOT, "plots", "zbplot.py"), a.out], check=True,
                       capture_output=True)
        print(f"figure: {os.path.join(a.out, 'figures', 'quantized_crossing.png')}")
    print(f"sweep and kernels at {a.sweep_gbps} Gbit/s; z3+qw:int8 predicted faster than z3 below "
          f"{cross:.3g} Gbit/s; both measured at {a.bracket:g} times below and above it")
    print("| Gbit/s | z3 measured (ms) | predicted | z3+qw:int8 measured (ms) | predicted | faster measured "
          "| faster predicted |")
    print("|---|---|---|---|---|---|---|")
    for r in rates:
        path = os.path.join(tmp, f"q_zero_{r:.3g}.json")
        on_cluster(2, 1, r, lambda: run(a, 0, "zb_zero", [*config, "--iters=5", "--warmup=2", "--no-check",
                                                            f"--json={path}"], cluster=True))
        with open(path) as f:
            got = {b["name"].split("/")[2].startswith("quantize_weights"): b for b in json.load(f)["benchmarks"]
                   if b.get("run_type", "iteration") == "iteration"}
        m = {q: got[q]["step_s"] for q in (False, True)}
        p = {q: predicted[(q, rate_key(r))]["step_s_predicted"] for q in (False, True)}
        name = lambda steps: "z3+qw:int8" if steps[True] < steps[False] else "z3"  # noqa: E731
        print(f"| {r:.3g} | {m[False] * 1e3:.1f} | {p[False] * 1e3:.1f} | {m[True] * 1e3:.1f} | {p[True] * 1e3:.1f} "
              f"| {name(m)} | {name(p)} |")
