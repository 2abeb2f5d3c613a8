# Sourced by run_all.sh: the sizes every benchmark family runs at, for the backend ($backend)
# and the run's size ($quick). It only sets arrays and values; run_all.sh launches.
# shellcheck shell=bash disable=SC2034

# Sizes: --quick is the CI configuration and the committed baseline's; the full run is sized
# for a paper. Compute on CPUs sleeps (it must not steal the cores communication runs on);
# on GPUs it is cuBLAS GEMMs of the given token count, and the sweep spins on the GPU.
if ((quick)); then
  coll=(--min-bytes=1K --max-bytes=1M --step-factor=4 --iters=5 --warmup=2)
  model=(--params=2e6 --layers=8 --bucket-mb=1)
  zero_iters=(--iters=3 --warmup=1)
  sweep=(--iters=2 --warmup=1 --compute-sweep=50,200,800)
  opt_args=(--min-params=256K --max-params=1M --step-factor=4 --step-params=512K --iters=3 --warmup=1)
  if [[ $backend == nccl ]]; then
    model=(--params=64e6 --layers=8 --bucket-mb=16)
    opt_args=(--min-params=1M --max-params=16M --step-factor=4 --step-params=4M --iters=5 --warmup=2)
  fi
elif [[ $backend == nccl ]]; then
  coll=(--min-bytes=1K --max-bytes=1G --step-factor=2 --iters=20 --warmup=5)
  model=(--params=5e8 --layers=16 --bucket-mb=25)
  zero_iters=(--iters=10 --warmup=3)
  sweep=(--iters=5 --warmup=2 --compute-sweep=0,100,300,1000,3000,10000)
  opt_args=(--iters=10 --warmup=3)
else
  coll=(--min-bytes=1K --max-bytes=64M --step-factor=2 --iters=10 --warmup=3)
  model=(--params=16e6 --layers=32 --bucket-mb=0.9)  # one bucket per layer: what overlap hides best
  zero_iters=(--iters=10 --warmup=3)
  sweep=(--iters=5 --warmup=2 --compute-sweep=0,100,300,1000,3000,10000)
  opt_args=(--iters=10 --warmup=3)
fi
# The predictor's sweep reaches past the model's largest collective (a bucket or a layer).
predict_max=$( ((quick)) && echo 4M || echo 8M)
[[ $backend == nccl ]] && predict_max=$( ((quick)) && echo 64M || echo 256M)
# The pipeline: 2 pipeline ranks of 2 chunks each, every data-parallel rank playing rank 0 (the
# one with the longest warm-up), micro-batches swept for the volume and memory against M.
# --quick times one M only; its socket run still sweeps M for the figure.
pipe_timed=()
if ((quick)); then
  pipe=(--params=1e6 --layers=8 --pp=2 --chunks=2 --microbatches=2,4,8 --iters=3 --warmup=1)
  [[ $backend == nccl ]] && pipe=(--params=64e6 --layers=16 --pp=2 --chunks=2 --microbatches=2,4,8 --iters=3 --warmup=1)
  pipe_timed=(--microbatches=4)
elif [[ $backend == nccl ]]; then
  pipe=(--params=5e8 --layers=32 --pp=2 --chunks=2 --microbatches=2,4,8,16 --iters=5 --warmup=2)
else
  pipe=(--params=16e6 --layers=32 --pp=2 --chunks=2 --microbatches=2,4,8,16 --iters=5 --warmup=2)
fi
# Offload: compute per chunk (gradients) and per layer (weights) above the hide condition
# (reduce-scatter + copy + add of one chunk, which zb_offload measures and prints), so two
# slots should hide the copies and one cannot; the sweep crosses the condition.
if ((quick)); then
  offload=(--params=1e6 --layers=8 --chunks=4 --microbatches=2 --iters=3 --warmup=1)
  offload_compute=(--compute=sleep:3000) offload_sweep=(--compute-sweep=0,1000,5000)
  [[ $backend == nccl ]] && offload=(--params=64e6 --layers=8 --chunks=4 --microbatches=2 --iters=3 --warmup=1) \
    offload_compute=(--compute=spin:10000) offload_sweep=(--compute=spin:0 --compute-sweep=0,1000,10000)
elif [[ $backend == nccl ]]; then
  offload=(--params=2e8 --layers=32 --chunks=8 --microbatches=4 --iters=5 --warmup=2)
  offload_compute=(--compute=spin:30000)
  offload_sweep=(--compute=spin:0 --compute-sweep=0,1000,3000,10000,30000,100000)
else
  offload=(--params=16e6 --layers=16 --chunks=4 --microbatches=4 --iters=5 --warmup=2)
  offload_compute=(--compute=sleep:30000) offload_sweep=(--compute-sweep=0,1000,3000,10000,30000,100000)
fi
if [[ $backend == nccl ]]; then
  compute=(--compute=gemm:$( ((quick)) && echo 512 || echo 4096)) sweep_kind=(--compute=spin:0)
else
  compute=(--compute=sleep:$( ((quick)) && echo 200 || echo 1000)) sweep_kind=()
fi
