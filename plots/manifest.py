#!/usr/bin/env python3
"""Writes RESULTS_DIR/manifest.json for run_all.sh: revision, commands, versions, hardware."""

import argparse
import glob
import json
import os
import platform
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Environment variables that choose transports and collective algorithms.
SETTING_PREFIXES = ("OMPI_MCA_", "NCCL_", "UCX_", "CUDA_VISIBLE_DEVICES")


def sh(*cmd):
    """A command's stdout, stripped; "" when it is missing or fails."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=ROOT)
    except (OSError, subprocess.SubprocessError):
        return ""
    return r.stdout.strip() if r.returncode == 0 else ""


def first_line(text):
    return text.splitlines()[0].strip() if text else ""


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def cmake_cache(key):
    cache = read(os.path.join(ROOT, "build", "CMakeCache.txt"))
    m = re.search(rf"^{re.escape(key)}:[A-Z]+=(.*)$", cache, re.M)
    return m.group(1) if m else ""


def nccl_version():
    """From the header the build compiled against (NCCL_MAJOR/MINOR/PATCH), when NCCL is used."""
    lib = cmake_cache("NCCL_LIBRARY")
    if not lib or not os.path.exists(lib):
        return ""
    header = read(os.path.join(cmake_cache("NCCL_INCLUDE_DIR"), "nccl.h"))
    parts = [re.search(rf"^#define NCCL_{k}\s+(\d+)", header, re.M)
             for k in ("MAJOR", "MINOR", "PATCH")]
    if all(parts):
        return ".".join(m.group(1) for m in parts)
    return os.path.realpath(lib)


def cuda_version():
    nvcc = cmake_cache("CMAKE_CUDA_COMPILER") or "nvcc"
    m = re.search(r"release ([\d.]+)", sh(nvcc, "--version"))
    return m.group(1) if m else ""


def hardware():
    cpuinfo = read("/proc/cpuinfo")
    model = re.search(r"^model name\s*:\s*(.*)$", cpuinfo, re.M)
    mem = re.search(r"^MemTotal:\s*(\d+) kB", read("/proc/meminfo"), re.M)
    gpus = []
    for line in sh("nvidia-smi", "--query-gpu=index,name,memory.total,pci.bus_id",
                   "--format=csv,noheader").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4:
            gpus.append(dict(zip(("index", "name", "memory", "bus_id"), parts)))
    return {
        "cpu_model": model.group(1).strip() if model else platform.processor(),
        "cores": os.cpu_count(),
        "sockets": len(set(re.findall(r"^physical id\s*:\s*(\d+)", cpuinfo, re.M))) or None,
        "memory_bytes": int(mem.group(1)) * 1024 if mem else None,
        "gpus": gpus,
        "gpu_topology": sh("nvidia-smi", "topo", "-m") if len(gpus) > 1 else "",
        "kernel": platform.release(),
    }


def versions():
    driver = first_line(sh("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"))
    return {
        "mpi": first_line(sh("mpirun", "--version")),
        "nccl": nccl_version(),
        "cuda": cuda_version(),
        "driver": driver,
        "compiler": first_line(sh(cmake_cache("CMAKE_CXX_COMPILER") or "c++", "--version")),
        "cmake": first_line(sh("cmake", "--version")),
        "python": platform.python_version(),
        "os": platform.platform(),
    }


def runs(tsv):
    """The rows run_all.sh logged: label, json, status, seconds, settings, command."""
    out = []
    for line in read(tsv).splitlines():
        f = line.split("\t")
        if len(f) != 6:
            continue
        row = {"name": f[0], "json": f[1] or None, "status": f[2], "seconds": float(f[3] or 0)}
        if f[2] == "skipped":
            row["why"] = f[4]
        else:
            row["settings"] = f[4]
            row["command"] = f[5]
        out.append(row)
    return out


def algorithms_seen(results):
    """What each benchmark recorded itself in its JSON context (the settings it ran under)."""
    seen = {}
    for path in sorted(glob.glob(os.path.join(glob.escape(results), "*.json"))):
        try:
            with open(path, encoding="utf-8") as f:
                ctx = json.load(f).get("context", {})
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(ctx, dict) and "collective_algorithms" in ctx:
            seen[os.path.basename(path)] = ctx["collective_algorithms"]
    return seen


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("results")
    p.add_argument("--runs", required=True, help="TSV of runs written by run_all.sh")
    p.add_argument("--backend", default="")
    p.add_argument("--ranks", type=int, default=0)
    p.add_argument("--gpus", type=int, default=0)
    p.add_argument("--quick", default="0")
    p.add_argument("--launcher", default="")
    p.add_argument("--argv", default="", help="run_all.sh's own arguments")
    p.add_argument("--slurm-pmi", default="", help="srun's --mpi plugin, under Slurm")
    p.add_argument("--slurm-pmi-from", default="", help="how the plugin was chosen")
    a = p.parse_args(argv)
    slurm = None
    if a.slurm_pmi:
        slurm = {"job_id": os.environ.get("SLURM_JOB_ID", ""),
                 "nodes": os.environ.get("SLURM_JOB_NUM_NODES", os.environ.get("SLURM_NNODES", "")),
                 "ntasks": os.environ.get("SLURM_NTASKS", os.environ.get("SLURM_NPROCS", "")),
                 "pmi": a.slurm_pmi, "pmi_chosen_by": a.slurm_pmi_from}
    manifest = {
        "revision": sh("git", "rev-parse", "HEAD"),
        "dirty": bool(sh("git", "status", "--porcelain", "--untracked-files=no")),
        "host": platform.node(),
        "run_all": ("./run_all.sh " + a.argv).strip(),
        "quick": a.quick == "1",
        "backend": a.backend,
        "ranks": a.ranks,
        "launcher": a.launcher,
        "slurm": slurm,
        "runs": runs(a.runs),
        "algorithm_settings": {
            "environment": {k: v for k, v in sorted(os.environ.items())
                            if k.startswith(SETTING_PREFIXES)},
            "recorded_by_benchmarks": algorithms_seen(a.results),
        },
        "versions": versions(),
        "hardware": hardware(),
    }
    manifest["hardware"]["gpus_visible"] = a.gpus
    path = os.path.join(a.results, "manifest.json")
    fd, tmp = tempfile.mkstemp(dir=a.results, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    os.chmod(tmp, 0o644)  # mkstemp makes it private; results are for everyone to read
    os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
