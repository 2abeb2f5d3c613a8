#!/usr/bin/env python3
"""PyTorch's fused AdamW on CUDA doing the work of zb_optimizer's Adam kernel, for the GPU check.

Per iteration, on one flat tensor of N parameters each, it times (CUDA events, best iteration,
as zb_optimizer reports its kernels):
  grad32.copy_(grad_bf16)    only with --grad-dtype=bf16: PyTorch's fused Adam needs gradients in
                             the parameters' dtype, so a BF16 gradient is widened first
  opt.step()                 torch.optim.AdamW(fused=True) on an FP32 master parameter, with
                             FP32 exp_avg and exp_avg_sq, lr 1e-3, betas (0.9, 0.999), eps 1e-8,
                             weight_decay 0.01 (the values zb_optimizer uses)
  weights.copy_(master)      the BF16 weights, which our kernel writes in the same pass
These are our kernel's inputs and outputs, so GB/s by our byte model (28 bytes per parameter
with BF16 gradients, 30 with FP32) compares equal work: the ratio of GB/s is the ratio of times.
`step-only` is the fused step alone on FP32 gradients, by its own traffic (28: reads param, grad,
m, v; writes param, m, v). With --ours=JSON (zb_optimizer --json output) it prints ours/torch for
each size. Exits 0 with a 'skipped' line when torch or a CUDA device is missing.
"""
import argparse
import inspect
import json
import sys

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    text = text.strip().upper()
    unit = text[-1] if text and text[-1] in UNITS else ""
    try:
        value = float(text[: len(text) - len(unit)])
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size like 1048576, 64M or 1G")
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}': sizes are at least 1 parameter")
    return int(value * UNITS[unit])


def parse_sizes(text):
    return [parse_size(t) for t in text.split(",") if t.strip()]


def our_gbps(path, grad):
    """params -> GBps of zb_optimizer's adam/params:N/grad:G/impl:cuda benchmarks."""
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data.get("benchmarks", []):
        name = b.get("run_name", b.get("name", "")).split("/iterations:")[0]
        parts = name.split("/")
        if parts[0] == "adam" and f"grad:{grad}" in parts and "impl:cuda" in parts:
            out[int(parts[1].split(":")[1])] = b["GBps"]
    return out


def best_ms(torch, fn, iters, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return min(times)


def time_size(torch, n, grad_dtype, iters, warmup):
    dev = torch.device("cuda")
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

    full_ms = best_ms(torch, full, iters, warmup)
    step_ms = best_ms(torch, opt.step, iters, warmup)
    del opt, master, grad, weights
    torch.cuda.empty_cache()
    return full_ms, step_ms


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=parse_sizes, default=parse_sizes("1M,4M,16M,64M,256M"),
                   help="parameter counts, comma-separated (K, M, G: powers of 1024)")
    p.add_argument("--grad-dtype", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--ours", help="zb_optimizer JSON with adam/.../impl:cuda benchmarks to compare")
    args = p.parse_args()
    if args.iters < 1 or args.warmup < 0:
        p.error("--iters must be >= 1 and --warmup >= 0")
    try:
        import torch
    except ImportError:
        print("torch_adam: skipped: no torch/CUDA (torch is not installed)")
        return 0
    if not torch.cuda.is_available():
        print(f"torch_adam: skipped: no torch/CUDA (torch {torch.__version__} sees no CUDA device)")
        return 0
    if "fused" not in inspect.signature(torch.optim.AdamW).parameters:
        print(f"torch_adam: skipped: torch {torch.__version__} has no fused AdamW")
        return 0
    ours = our_gbps(args.ours, args.grad_dtype) if args.ours else {}
    model = 28 if args.grad_dtype == "bf16" else 30  # kernels/optimizer.h: adam_bytes_per_param
    gdt = torch.bfloat16 if args.grad_dtype == "bf16" else torch.float32
    print(f"# torch_adam: torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"AdamW(fused=True), {args.grad_dtype} gradients, {model} bytes/param")
    print("# params  torch(ms)  torch GB/s  step-only(ms)  step-only GB/s  ours GB/s  ours/torch")
    for n in args.sizes:
        with torch.no_grad():  # the BF16 copy of the master must not enter autograd
            full_ms, step_ms = time_size(torch, n, gdt, args.iters, args.warmup)
        torch_gbps = model * n / (full_ms * 1e-3) / 1e9
        step_gbps = 28 * n / (step_ms * 1e-3) / 1e9
        mine = ours.get(n)
        ratio = f"{mine / torch_gbps:.3f}" if mine else "n/a"
        mine_text = f"{mine:.1f}" if mine else "n/a"
        print(f"{n:>9} {full_ms:>10.3f} {torch_gbps:>11.1f} {step_ms:>14.3f} {step_gbps:>15.1f} "
              f"{mine_text:>10} {ratio:>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
