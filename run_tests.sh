#!/usr/bin/env bash
# Builds zerobench in both configurations (CUDA when nvcc is here, and -DZB_CUDA=OFF) and
# runs every test through ctest: unit tests, multi-rank runs under mpirun, the plots tool.
# Extra arguments go to ctest (for example -R mpi. or --output-on-failure).
set -euo pipefail
cd "$(dirname "$0")"
tools/install_deps.sh
tools/build.sh build
tools/build.sh build-nocuda -DZB_CUDA=OFF
# Two more things tests need, made here so that the suite's time is the tests' own: the build
# from the GPU bundle alone (bundle.test_bare_build then finds it current, checks and runs it;
# from nothing it compiled for 160 s inside the suite) and Slurm for slurm.test_slurm_run_all.
# Where either cannot be had, that test skips with the reason or fails with the log.
rc=0
tools/bare_build.sh --build=build/bare_build --build-only >build/bare_build.log 2>&1 || rc=$?
((rc == 0 || rc == 77)) \
  || echo "zerobench: the build from the GPU bundle failed, see build/bare_build.log: $(tail -n 1 build/bare_build.log)" >&2
tests/slurm/local_slurm.sh install || true
# Two jobs more than cores: much of the suite waits rather than computes (mpirun starting,
# timeouts a test provokes, sleeping compute), so as many jobs as cores left them idle. On 2
# cores, 2026-12-03: 308 s of ctest with 2 jobs, 293 s with 3, 268 s with 4.
ctest --test-dir build --output-on-failure -j "$(( $(nproc 2>/dev/null || echo 2) + 2 ))" "$@"
