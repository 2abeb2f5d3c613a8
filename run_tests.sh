#!/usr/bin/env bash
# Builds zerobench in both configurations (CUDA when nvcc is here, and -DZB_CUDA=OFF) and
# runs every test through ctest: unit tests, multi-rank runs under mpirun, the plots tool.
# Extra arguments go to ctest (for example -R mpi. or --output-on-failure).
set -euo pipefail
cd "$(dirname "$0")"
tools/install_deps.sh
tools/build.sh build
tools/build.sh build-nocuda -DZB_CUDA=OFF
# Two jobs more than cores: much of the suite waits rather than computes (mpirun starting,
# timeouts a test provokes, sleeping compute), so as many jobs as cores left them idle. On 2
# cores, 2026-12-03: 308 s of ctest with 2 jobs, 293 s with 3, 268 s with 4.
ctest --test-dir build --output-on-failure -j "$(( $(nproc 2>/dev/null || echo 2) + 2 ))" "$@"
