"""The cost model of run_all.sh's runs: how many benchmarks a run registers and how long it takes,
from its own arguments (bytes moved, steps, compute) and the machine terms in tools/run_table.toml.

Each binary's model follows what its benchmark body does per repetition: the warm-up and timed
steps, the traced step, the split into compute alone and communication alone (3 rounds of 2 steps
each per iteration), the check against the reference, the bandwidth probes. A step costs its
compute (sleep and spin take what they say; a GEMM its flops at the machine's rate), its bytes on
the link (ring: 2(N-1)/N of a buffer per all-reduce, (N-1)/N per reduce-scatter or all-gather)
and the optimizer's bytes through memory. What the host does around it (setting up the state,
the references the checks compare with, the checks themselves) moves at the host's own rate,
which on a GPU node is the CPU's, not the GPU memory's. The model is a sizing tool: run_all.py
prints its estimate, then the actual time, and scales the next estimate by the ratio the last
run found."""

import math
import os
import re

# The steps --trace runs to draw the median one: read from the C++ that runs them, one place.
with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "harness", "driver",
                       "wait_causes.h"), encoding="utf-8") as _f:
    TRACE_CANDIDATES = int(re.search(r"constexpr int kTraceCandidates = (\d+);", _f.read()).group(1))
GRAD_BYTES = 2    # bf16 gradients and weights on the wire
ADAM_BYTES = 28   # bytes an Adam update streams per parameter (plots and zb_optimizer agree)


class Flags:
    """A run's arguments as zb binaries read them: --name=value, the last one winning."""

    def __init__(self, argv):
        self.values = {}
        for a in argv:
            if a.startswith("--"):
                name, _, value = a[2:].partition("=")
                self.values[name] = value if "=" in a else True

    def has(self, name):
        return name in self.values

    def text(self, name, default=""):
        v = self.values.get(name, default)
        return default if v is True else v

    def number(self, name, default):
        v = self.text(name, "")
        return parse_count(v) if v else default

    def nbytes(self, name, default):
        v = self.text(name, "")
        return parse_bytes(v) if v else default

    def items(self, name, default):
        v = self.text(name, "")
        return [x for x in v.split(",") if x] if v else list(default)


_SUFFIX = re.compile(r"^([0-9.eE+-]+)([KMGT]?)$")


def parse_count(text):
    """Parameter counts: decimal suffixes (K = 1e3), as every binary reads them."""
    m = _SUFFIX.match(text)
    if not m:
        raise ValueError(f"not a count: {text!r}")
    return float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[m.group(2)]


def parse_bytes(text):
    """Byte sizes: binary suffixes (K = 1024)."""
    m = _SUFFIX.match(text)
    if not m:
        raise ValueError(f"not a byte size: {text!r}")
    return float(m.group(1)) * 1024 ** " KMGT".index(m.group(2) or " ")


def size_sweep(lo, hi, factor):
    """zb_collectives' and zb_optimizer's sizes: geometric from lo, the last one pinned to hi."""
    if lo > hi:
        return []
    if factor <= 1:
        return [lo]
    sizes, b = [], float(lo)
    while b <= hi * (1 + 1e-9):
        v = round(b)
        if not sizes or v != sizes[-1]:
            sizes.append(v)
        b *= factor
    if sizes[-1] != hi:
        sizes.append(hi)
    return sizes


def compute_step_s(spec, params, layers, machine):
    """Forward + backward (twice the forward) of every layer, per the --compute spec."""
    kind, _, value = spec.partition(":")
    if kind in ("sleep", "spin"):
        return 3 * layers * float(value) * 1e-6 * machine["sleep_factor"]
    if kind == "gemm":
        return 3 * 2 * float(value) * params / machine["flops"]
    return 0.0


class Model:
    """Estimates for one backend's machine, N ranks; `cost` holds the per-binary terms."""

    def __init__(self, machine, cost, ranks):
        self.m, self.c, self.n = machine, cost, max(1, ranks)

    def ring_s(self, nbytes, passes, bw):
        """One collective moving a buffer of nbytes: passes = 2 for all-reduce, 1 otherwise."""
        if self.n == 1:
            return self.m["latency_s"]
        frac = (self.n - 1) / self.n
        return passes * ((self.n - 1) * self.m["latency_s"] + frac * nbytes / bw)

    def steps(self, f, default_iters, default_warmup):
        return f.number("iters", default_iters) + f.number("warmup", default_warmup)

    # Each returns [(benchmark count, seconds of one repetition of each)], grouped.

    def zb_collectives(self, f, bw):
        c = self.c["zb_collectives"]
        sizes = size_sweep(f.nbytes("min-bytes", 1024), f.nbytes("max-bytes", 64 << 20),
                           f.number("step-factor", 2))
        ops = f.items("ops", c["ops"])
        steps = self.steps(f, 20, 5)
        # ours, bare, bare, ours (or ours alone with --no-bare), then --serial's own loop
        timings = (1 if f.has("no-bare") else 4) + f.has("serial")
        # --placement=in times the all-reduce, reduce-scatter and all-gather once more, in place
        in_place = "in" in f.items("placement", ["out"])
        # --footprint times each op --footprint-ops names at each footprint listed (0: one buffer),
        # writing the spread's buffers first and using each twice, untimed; the other ops once.
        # --gather-footprint adds footprints to the all-gathers alone.
        footprints = [parse_bytes(x) for x in f.items("footprint", ["0"])]
        gathers_more = [parse_bytes(x) for x in f.items("gather-footprint", [])]
        spread_ops = f.items("footprint-ops", ops)
        out = []
        for op in ops + ([o for o in ops if o in c["ops"]] if in_place else []):
            passes = 2 if "all_reduce" in op else 1
            more = gathers_more if op == "all_gather" else []
            for footprint in footprints + more if op in spread_ops else [0]:
                for b in sizes:
                    one = self.ring_s(b, passes, bw)
                    check = c["check_passes"] * b / self.m["host_Bps"] + one
                    primed = 2 * max(1, footprint // b) * one
                    out.append((1, self.m["bench_s"] + timings * steps * one + check + primed
                                + footprint / self.m["mem_Bps"]))
        return out

    def configurations(self, f):
        """Benchmarks per compute point: one per stage and value of --quantize-weights and
        --quantize-grads, a row that quantizes as its own says (zpp) once. Exact where every
        other stage named takes both flags (z3, hpz), an upper bound otherwise."""
        stages = f.items("stages", [""] * self.c["zb_zero"]["stages"])
        both = len(f.items("quantize-weights", [""])) * len(f.items("quantize-grads", [""]))
        own = self.c["zb_zero"]["own_quantization"]
        return sum(1 if s in own else both for s in stages)

    def quantized_split(self, f):
        """(benchmarks checked plainly, benchmarks checked against the quantized interval)."""
        total = self.configurations(f)
        quantizes = f.has("quantize-weights") or f.has("quantize-grads")
        own = sum(1 for s in f.items("stages", []) if s in self.c["zb_zero"]["own_quantization"])
        quantized = total if quantizes else own
        return total - quantized, quantized

    def zb_zero(self, f, bw):
        c = self.c["zb_zero"]
        psi, layers = f.number("params", 16e6), f.number("layers", 16)
        steps = self.steps(f, 10, 2)
        comm = self.ring_s(c["volume_psi"] * psi * GRAD_BYTES / 2, 2, bw)
        update = psi * ADAM_BYTES / self.n / self.m["mem_Bps"]
        setup = psi * c["state_bytes"] * 2 / self.m["host_Bps"]
        check = steps * psi * c["check_bytes"] / self.m["host_Bps"]
        spec = f.text("compute", "none")
        sweep = f.items("compute-sweep", [])
        kind = "spin" if spec.startswith("spin") else "sleep"
        points = [f"{kind}:{us}" for us in sweep] or [spec]
        out = []
        for p in points:
            comp = compute_step_s(p, psi, layers, self.m)
            full = (max(comp, comm) if f.text("overlap", "on") == "on" else comp + comm) + update
            traced = 1 + TRACE_CANDIDATES if f.has("trace") else 0
            # timed, an untimed step and the traced candidates, then the split: 3 rounds per iteration,
            # each an untimed step of its kind and a timed one (full, communication alone,
            # compute alone)
            t = (steps + traced + 2 * steps) * full + 2 * steps * (comm + update) + 2 * steps * comp
            t += setup + self.m["bench_s"]
            plain, quantized = self.quantized_split(f)
            if plain:
                out.append((plain, t + (0 if sweep else check)))
            if quantized:
                # The quantized check carries an interval through every rank's gradient at each
                # weight its bound allows: several times the plain reference's work.
                out.append((quantized, t + (0 if sweep else check * c["quantized_check_factor"])))
        return out

    def zb_pipeline(self, f, bw):
        c = self.c["zb_pipeline"]
        psi, layers = f.number("params", 16e6), f.number("layers", 16)
        pp, chunks = f.number("pp", 2), f.number("chunks", 2)
        strategies = len(f.items("stages", f.items("strategies", [""] * c["strategies"])))
        steps = self.steps(f, 10, 2)
        split = not f.has("no-split")
        psi_s = psi / pp
        spec = f.text("compute", "none")
        per_layer = compute_step_s(spec, psi_s / (layers / pp), 1, self.m)  # one layer, fwd + bwd
        update = psi_s * ADAM_BYTES / self.n / self.m["mem_Bps"]
        setup = psi_s * c["state_bytes"] * 2 / self.m["host_Bps"]
        out = []
        for m in (int(x) for x in f.items("microbatches", ["4"])):
            comp = m * per_layer * layers / pp + (pp - 1) * per_layer * layers / (pp * chunks)
            comm = self.ring_s((c["volume_psi"] + c["volume_psi_per_microbatch"] * m) * psi_s * GRAD_BYTES / 2,
                               2, bw)
            full = max(comp, comm) + update
            check = steps * m * psi_s * c["check_bytes"] / self.m["host_Bps"]
            traced = 1 + TRACE_CANDIDATES if f.has("trace") else 0  # an untimed step, then the candidates
            t = (steps + traced) * full + setup + check + self.m["bench_s"]
            if split:
                t += 2 * steps * full + 2 * steps * (comm + update) + 2 * steps * comp + 2 * steps * comm
            out.append((strategies, t))
        return out

    def zb_offload(self, f, bw):
        c = self.c["zb_offload"]
        psi, layers = f.number("params", 16e6), f.number("layers", 16)
        mb, chunks = f.number("microbatches", 4), f.number("chunks", 4)
        families = f.items("offload", c["families"])
        slots = len(f.items("slots", ["1", "2", "3"]))
        steps = self.steps(f, 10, 2)
        spec = f.text("compute", "none")
        kind = "spin" if spec.startswith("spin") else "sleep"
        points = [f"{kind}:{us}" for us in f.items("compute-sweep", [])] or [spec]
        copy = self.m["copy_Bps"]
        # The gradients' optimizer runs where --optimizer-on says: on the host, at the host's rate.
        update_Bps = self.m["host_Bps"] if f.text("optimizer-on", "host") == "host" else self.m["mem_Bps"]
        check = 0 if f.has("no-check") else steps * psi * c["check_bytes"] / self.m["host_Bps"]
        out = []
        for fam in families:
            for p in points:
                unit = compute_step_s(p, 0, 1, self.m) / 3  # compute per chunk or per layer, once
                if fam == "grads":
                    comp = mb * chunks * unit
                    comm = mb * self.ring_s(psi * GRAD_BYTES, 1, bw)
                    moved = mb * psi / self.n * GRAD_BYTES / copy + psi / self.n * ADAM_BYTES / update_Bps
                    alone = steps * (unit + (comm + moved) / (mb * chunks) * 3)
                else:
                    comp = layers * unit
                    comm, moved = 0.0, psi * GRAD_BYTES / copy
                    alone = 0.0
                limits = steps * 3 * c["copies"] * psi / max(chunks, 1) * GRAD_BYTES / copy
                setup = psi * c["state_bytes"] / self.m["host_Bps"]
                t = steps * (comp + comm + moved) + alone + limits + setup + check + self.m["bench_s"]
                out.append((slots, t))
        return out

    def zb_optimizer(self, f, bw):
        c = self.c["zb_optimizer"]
        kinds = len(f.items("kernels", ["adam", "momentum"]))
        grads = len(f.items("grad-dtype", ["bf16", "f32"]))
        parts = f.items("parts", ["kernels", "step"])
        steps = self.steps(f, 10, 2)
        mem = self.m["mem_Bps"]
        out = []
        if "kernels" in parts:
            for p in size_sweep(f.number("min-params", 2 ** 20), f.number("max-params", self.m["optimizer_max_params"]),
                                f.number("step-factor", 4)):
                foot = p * ADAM_BYTES
                out.append((kinds * grads, steps * c["kernel_passes"] * foot / mem + 2 * foot / mem + self.m["bench_s"]))
                # The synthetic gradient per gradient dtype: it reads the BF16 weight, writes the gradient.
                foot = p * (2 + GRAD_BYTES)
                out.append((grads, steps * c["kernel_passes"] * foot / mem + 2 * foot / mem + self.m["bench_s"]))
        if "quantize" in parts:
            for p in size_sweep(f.number("min-params", 2 ** 20), f.number("max-params", self.m["optimizer_max_params"]),
                                f.number("step-factor", 4)):
                foot = p * c["quant_bytes"]
                out.append((c["quant_kernels"] * grads + c["quant_reductions"],
                            steps * c["kernel_passes"] * foot / mem + 2 * foot / mem + self.m["bench_s"]))
        if "step" in parts:
            p = f.number("step-params", 16 * 2 ** 20)
            stages = len(f.items("stages", [""] * c["stages"]))
            one = (self.ring_s(p * GRAD_BYTES, 1, bw) * 2 + p / self.n * ADAM_BYTES / mem)
            host = p * (c["state_bytes"] + c["check_steps"] * c["check_bytes"]) / self.m["host_Bps"]
            t = (steps + c["check_steps"]) * one + host + self.m["bench_s"]
            out.append((kinds * grads * stages, t))
        return out

    def zb_predict(self, f, bw):
        c = self.c["zb_predict"]
        stages = len(f.items("stages", [""] * self.c["zb_zero"]["stages"]))
        mbs = len(f.items("microbatches", [""]))
        rates = len(f.items("link-gbps", [""]))
        own = self.c["zb_zero"]["own_quantization"]
        if not (f.has("quantize-weights") or f.has("quantize-grads") or set(f.items("stages", [])) & set(own)):
            return [(stages * mbs * rates, c["benchmark_s"])]
        return [(self.configurations(f) * rates, c["quantized_s"])]

    def zb_plan(self, f, bw):
        return [(1, self.c["zb_plan"]["seconds"])]


def estimate(run_binary, argv, launch, ranks, repetitions, machine, cost):
    """(benchmarks, seconds) of one run: its launch, then every benchmark's repetitions."""
    model = Model(machine, cost, ranks)
    f = Flags(argv)
    bw = machine["wire_Bps"] if launch == "wire" else machine["link_Bps"]
    reps = f.number("benchmark_repetitions", repetitions)
    groups = getattr(model, run_binary)(f, bw)
    count = sum(k for k, _ in groups)
    seconds = sum(k * t for k, t in groups) * reps
    start = machine["single_s"] if launch == "single" else machine["launch_s"]
    return count, start + seconds


def per_benchmark(run_binary, argv, launch, ranks, repetitions, machine, cost):
    """Seconds of each benchmark in the order the binary runs them (for the time left)."""
    model = Model(machine, cost, ranks)
    f = Flags(argv)
    bw = machine["wire_Bps"] if launch == "wire" else machine["link_Bps"]
    reps = f.number("benchmark_repetitions", repetitions)
    out = []
    for k, t in getattr(model, run_binary)(f, bw):
        out.extend([t * reps] * int(k))
    return out


def check_terms(table):
    """Every binary the table runs has a model, and the terms it reads; returns the errors."""
    errors = []
    for run in table.runs:
        if not hasattr(Model, run.binary):
            errors.append(f"run {run.label}: no cost model for binary {run.binary}")
    for backend, machine in table.machine.items():
        for key in ("launch_s", "single_s", "bench_s", "latency_s", "link_Bps", "wire_Bps", "mem_Bps",
                    "host_Bps", "copy_Bps", "flops", "sleep_factor", "optimizer_max_params"):
            v = machine.get(key)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
                errors.append(f"machine.{backend}.{key} must be a number > 0, not {v!r}")
    return errors
