"""manifest.json of a run_all.py run (revision, commands, versions, hardware, every run with its
estimate and actual time), and what the next estimate learns from the newest earlier one."""

import glob
import json
import os
import platform
import re
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Environment variables that choose transports and collective algorithms.
SETTING_PREFIXES = ("OMPI_MCA_", "NCCL_", "UCX_", "CUDA_VISIBLE_DEVICES")
# How far one earlier run may move the next estimate: beyond this the earlier run was not a
# run of this machine as it is now (a neighbour's build, another configuration).
RATIO_LIMITS = (0.25, 4.0)


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


def cmake_cache(bin_dir, key):
    """A CMake cache entry of the build the binaries came from (for versions only)."""
    cache = read(os.path.join(bin_dir, "..", "CMakeCache.txt"))
    m = re.search(rf"^{re.escape(key)}:[A-Z]+=(.*)$", cache, re.M)
    return m.group(1) if m else ""


def nccl_version(bin_dir):
    """From the header the build compiled against (NCCL_MAJOR/MINOR/PATCH), when NCCL is used."""
    lib = cmake_cache(bin_dir, "NCCL_LIBRARY")
    if not lib or not os.path.exists(lib):
        return ""
    header = read(os.path.join(cmake_cache(bin_dir, "NCCL_INCLUDE_DIR"), "nccl.h"))
    parts = [re.search(rf"^#define NCCL_{k}\s+(\d+)", header, re.M) for k in ("MAJOR", "MINOR", "PATCH")]
    if all(parts):
        return ".".join(m.group(1) for m in parts)
    return os.path.realpath(lib)


def versions(bin_dir):
    nvcc = cmake_cache(bin_dir, "CMAKE_CUDA_COMPILER") or "nvcc"
    cuda = re.search(r"release ([\d.]+)", sh(nvcc, "--version"))
    return {
        "mpi": first_line(sh("mpirun", "--version")),
        "nccl": nccl_version(bin_dir),
        "cuda": cuda.group(1) if cuda else "",
        "driver": first_line(sh("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader")),
        "compiler": first_line(sh(cmake_cache(bin_dir, "CMAKE_CXX_COMPILER") or "c++", "--version")),
        "cmake": first_line(sh("cmake", "--version")),
        "python": platform.python_version(),
        "os": platform.platform(),
    }


def hardware(gpus_visible):
    """CPU, host memory and each GPU with its memory in bytes (what fits is decided from these)."""
    cpuinfo = read("/proc/cpuinfo")
    model = re.search(r"^model name\s*:\s*(.*)$", cpuinfo, re.M)
    mem = re.search(r"^MemTotal:\s*(\d+) kB", read("/proc/meminfo"), re.M)
    gpus = []
    for line in sh("nvidia-smi", "--query-gpu=index,name,memory.total,pci.bus_id",
                   "--format=csv,noheader,nounits").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4:
            mib = int(parts[2]) if parts[2].isdigit() else None
            gpus.append({"index": int(parts[0]) if parts[0].isdigit() else parts[0], "name": parts[1],
                         "memory_total_bytes": mib * 1048576 if mib is not None else None,
                         "bus_id": parts[3]})
    return {
        "cpu_model": model.group(1).strip() if model else platform.processor(),
        "cores": os.cpu_count(),
        "sockets": len(set(re.findall(r"^physical id\s*:\s*(\d+)", cpuinfo, re.M))) or None,
        "host_memory_bytes": int(mem.group(1)) * 1024 if mem else None,
        "gpus": gpus,
        "gpus_visible": gpus_visible,
        "gpu_topology": sh("nvidia-smi", "topo", "-m") if len(gpus) > 1 else "",
        "kernel": platform.release(),
    }


def algorithms_seen(results):
    """What each benchmark recorded itself in its JSON context (the settings it ran under)."""
    seen = {}
    for path in sorted(glob.glob(os.path.join(glob.escape(results), "*.json"))):
        if os.path.basename(path) == "manifest.json":
            continue
        try:
            with open(path, encoding="utf-8") as f:
                ctx = json.load(f).get("context", {})
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(ctx, dict) and "collective_algorithms" in ctx:
            seen[os.path.basename(path)] = ctx["collective_algorithms"]
    return seen


def learned_ratios(results_parent, out, host, size, backend, ranks):
    """Per family, actual / model estimate of the newest earlier run on this host of the same
    size, backend and rank count, within RATIO_LIMITS; and that run's folder ("" if none)."""
    best = None
    for path in glob.glob(os.path.join(glob.escape(results_parent), "*", "manifest.json")):
        if os.path.dirname(os.path.realpath(path)) == os.path.realpath(out):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                m = json.load(f)
        except (OSError, ValueError):
            continue
        if not isinstance(m, dict) or not isinstance(m.get("families"), dict):
            continue
        if (m.get("host"), m.get("size"), m.get("backend"), m.get("ranks")) != (host, size, backend, ranks):
            continue
        stamp = str(m.get("finished_utc", ""))
        if best is None or stamp > best[0]:
            best = (stamp, os.path.dirname(path), m["families"])
    if best is None:
        return {}, ""
    ratios = {}
    for fam, f in best[2].items():
        model, actual = f.get("model_s"), f.get("actual_s")
        # A family that took no measurable time (the plan, fake binaries) still teaches: its
        # ratio is clamped like any other.
        if f.get("complete") and isinstance(model, (int, float)) and isinstance(actual, (int, float)) \
                and model > 0 and actual >= 0:
            ratios[fam] = min(max(actual / model, RATIO_LIMITS[0]), RATIO_LIMITS[1])
    return ratios, best[1]


def write(out, doc):
    """manifest.json, whole or not at all."""
    fd, tmp = tempfile.mkstemp(dir=out, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.chmod(tmp, 0o644)  # mkstemp makes it private; results are for everyone to read
    os.replace(tmp, os.path.join(out, "manifest.json"))


def build(out, bin_dir, fields, runs, families, gpus_visible):
    """The manifest: the caller's fields (command, size, backend, ranks, launcher, Slurm, the
    estimate's basis), then the runs, the families' estimate and actual, settings and machine."""
    doc = {
        "revision": sh("git", "rev-parse", "HEAD"),
        "dirty": bool(sh("git", "status", "--porcelain", "--untracked-files=no")),
        "host": platform.node(),
    }
    doc.update(fields)
    doc["runs"] = runs
    doc["families"] = families
    doc["algorithm_settings"] = {
        "environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith(SETTING_PREFIXES)},
        "recorded_by_benchmarks": algorithms_seen(out),
    }
    doc["versions"] = versions(bin_dir)
    doc["hardware"] = hardware(gpus_visible)
    return doc
