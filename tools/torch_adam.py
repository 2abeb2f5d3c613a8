#!/usr/bin/env python3
"""PyTorch's fused AdamW doing the work of zb_optimizer's Adam kernel, on CUDA or on the CPU.

Per iteration, on one flat tensor of N parameters, it times:
  grad32.copy_(grad_bf16)    only with --grad-dtype=bf16: PyTorch's fused Adam needs gradients in
                             the parameters' dtype, so a BF16 gradient is widened first
  opt.step()                 torch.optim.AdamW(fused=True) on an FP32 master parameter, with
                             FP32 exp_avg and exp_avg_sq, lr 1e-3, betas (0.9, 0.999), eps 1e-8,
                             weight_decay 0.01 (the values zb_optimizer uses)
  weights.copy_(master)      the BF16 weights, which our kernel writes in the same pass
These are our kernel's inputs and outputs, so GB/s by our byte model (28 bytes per parameter
with BF16 gradients, 30 with FP32) compares equal work: the ratio of GB/s is the ratio of times.
`step-only` is the fused step alone on FP32 gradients, by its own traffic (28: reads param, grad,
m, v; writes param, m, v). Times are medians over the iterations, as zb_optimizer reports its
kernels. With --ours=JSON (zb_optimizer --json output) it prints ours/torch for each size; on the
CPU it uses the threads that run recorded.

Torch is a benchmark dependency only: where it is not importable the script makes a virtual
environment with it (--venv, from PyPI) and runs itself there; with --no-install, or where that
fails, it prints one 'skipped' line and exits 0.
"""
import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import time

# Parameter counts are decimal, as every zerobench flag reads them (16M is 16e6).
UNITS = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
DEFAULT_VENV = os.path.join(os.path.expanduser("~"), ".cache", "zerobench", "torch-venv")


def parse_size(text):
    text = text.strip().upper()
    unit = text[-1] if text and text[-1] in UNITS else ""
    try:
        value = float(text[: len(text) - len(unit)])
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a count like 1048576, 16e6, 64M or 1G")
    count = value * UNITS[unit]
    # 1.1M is 1100000.0000000002 in binary: within rounding of a whole number is one.
    if count < 1 or abs(count - round(count)) > 1e-9 * count:
        raise argparse.ArgumentTypeError(f"'{text}': a size is a whole number of parameters, at least 1")
    return int(round(count))


def parse_sizes(text):
    return [parse_size(t) for t in text.split(",") if t.strip()]


def ours(path, grad, impl):
    """params -> (GBps, threads) of zb_optimizer's adam/params:N/grad:G/impl:I benchmarks."""
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration":
            continue
        name = b.get("run_name", b.get("name", "")).split("/iterations:")[0]
        parts = name.split("/")
        if parts[0] == "adam" and f"grad:{grad}" in parts and f"impl:{impl}" in parts:
            out.setdefault(int(parts[1].split(":")[1]), []).append((b["GBps"], int(b.get("threads", 0))))
    # Repetitions: the median GB/s, as the figures show it.
    return {n: (statistics.median(g for g, _ in v), v[0][1]) for n, v in out.items()}


def median_ms(torch, fn, iters, warmup, cuda):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def time_size(torch, n, grad_dtype, iters, warmup, device):
    dev = torch.device(device)
    master = torch.nn.Parameter(torch.empty(n, dtype=torch.float32, device=dev).uniform_(-1, 1))
    # Gradients of the size our synthetic ones have (multiples of 1/64 up to 12/64).
    grad = (torch.randint(-11, 13, (n,), device=dev, dtype=torch.int32).float() / 64).to(grad_dtype)
    master.grad = grad.float()
    weights = torch.empty(n, dtype=torch.bfloat16, device=dev)
    opt = torch.optim.AdamW([master], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                            fused=True)

    def full():
        if grad_dtype == torch.bfloat16:
            master.grad.copy_(grad)
        opt.step()
        weights.copy_(master)

    cuda = device == "cuda"
    full_ms = median_ms(torch, full, iters, warmup, cuda)
    step_ms = median_ms(torch, opt.step, iters, warmup, cuda)
    del opt, master, grad, weights
    if cuda:
        torch.cuda.empty_cache()
    return full_ms, step_ms


def torch_or_venv(args):
    """torch, or None after re-running this script in a virtual environment that has it."""
    try:
        import torch
        return torch
    except ImportError:
        pass
    if args.no_install or os.environ.get("ZB_TORCH_VENV_TRIED"):
        print("torch_adam: skipped: torch is not installed (and no virtual environment made)")
        sys.exit(0)
    python = os.path.join(args.venv, "bin", "python")
    if not os.path.exists(python):
        print(f"torch_adam: making a virtual environment with torch in {args.venv} (PyPI)",
              file=sys.stderr)
        made = subprocess.run([sys.executable, "-m", "venv", args.venv]).returncode == 0 and \
            subprocess.run([python, "-m", "pip", "install", "-q", "torch", "numpy"]).returncode == 0
        if not made:
            print(f"torch_adam: skipped: could not install torch into {args.venv}")
            sys.exit(0)
    env = dict(os.environ, ZB_TORCH_VENV_TRIED="1")
    sys.exit(subprocess.run([python, os.path.abspath(__file__), *sys.argv[1:]], env=env).returncode)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=parse_sizes,
                   default=parse_sizes("1048576,4194304,16777216,67108864,268435456"),
                   help="parameter counts, comma-separated (16777216, 16e6, 16M: K, M, G, T decimal)")
    p.add_argument("--grad-dtype", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                   help="auto: cuda when torch sees a GPU, else cpu")
    p.add_argument("--threads", type=int, default=0,
                   help="CPU threads (default: those of the --ours run, else torch's own)")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--ours", help="zb_optimizer JSON with adam/... benchmarks to compare")
    p.add_argument("--venv", default=DEFAULT_VENV, help="virtual environment to make when torch is missing")
    p.add_argument("--no-install", action="store_true", help="never make a virtual environment")
    args = p.parse_args()
    if args.iters < 1 or args.warmup < 0 or args.threads < 0:
        p.error("--iters must be >= 1, --warmup >= 0 and --threads >= 0")
    torch = torch_or_venv(args)
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        print(f"torch_adam: skipped: torch {torch.__version__} sees no CUDA device")
        return 0
    if "fused" not in inspect.signature(torch.optim.AdamW).parameters:
        print(f"torch_adam: skipped: torch {torch.__version__} has no fused AdamW")
        return 0
    mine = ours(args.ours, args.grad_dtype, "cuda" if device == "cuda" else "cpu") if args.ours else {}
    threads = args.threads or next((t for _, t in mine.values() if t > 0), 0)
    if device == "cpu" and threads:
        torch.set_num_threads(threads)
    model = 28 if args.grad_dtype == "bf16" else 30  # kernels/optimizer.h: adam_bytes_per_param
    gdt = torch.bfloat16 if args.grad_dtype == "bf16" else torch.float32
    where = torch.cuda.get_device_name() if device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"# torch_adam: torch {torch.__version__}, {where}, AdamW(fused=True), "
          f"{args.grad_dtype} gradients, {model} bytes/param, medians of {args.iters} iterations")
    print("# params  torch(ms)  torch GB/s  step-only(ms)  step-only GB/s  ours GB/s  ours/torch")
    for n in args.sizes:
        with torch.no_grad():  # the BF16 copy of the master must not enter autograd
            full_ms, step_ms = time_size(torch, n, gdt, args.iters, args.warmup, device)
        torch_gbps = model * n / (full_ms * 1e-3) / 1e9
        step_gbps = 28 * n / (step_ms * 1e-3) / 1e9
        gbps = mine.get(n, (None, 0))[0]
        ratio = f"{gbps / torch_gbps:.3f}" if gbps else "n/a"
        mine_text = f"{gbps:.1f}" if gbps else "n/a"
        print(f"{n:>9} {full_ms:>10.3f} {torch_gbps:>11.1f} {step_ms:>14.3f} {step_gbps:>15.1f} "
              f"{mine_text:>10} {ratio:>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
