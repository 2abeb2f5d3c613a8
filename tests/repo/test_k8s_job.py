"""deploy/k8s_job.yaml, the README's Kubernetes example, parsed: an Indexed Job whose pod count is
WORLD_SIZE, a headless Service that names pod 0 as MASTER_ADDR says, the rendezvous port the same
everywhere, and a command whose flags the binary's --help lists and whose variables the binary
reads as a launch of WORLD_SIZE ranks (--show-launch)."""

import os
import shlex
import subprocess

import yaml

ROOT = os.path.abspath(os.environ.get("ZB_ROOT", os.path.join(os.path.dirname(__file__), "..", "..")))
BIN = os.environ.get("ZB_BIN", os.path.join(ROOT, "build", "bin"))
SPEC = os.path.join(ROOT, "deploy", "k8s_job.yaml")


def load():
    with open(SPEC) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    kinds = {d["kind"]: d for d in docs}
    assert sorted(kinds) == ["Job", "Service"], sorted(kinds)
    return kinds["Job"], kinds["Service"]


def container(job):
    (c,) = job["spec"]["template"]["spec"]["containers"]
    return c, {e["name"]: e["value"] for e in c["env"]}


def test_the_job_names_its_ranks_and_rank_0_consistently():
    job, svc = load()
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    c, env = container(job)
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == int(env["WORLD_SIZE"])
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["selector"] == {"job-name": job["metadata"]["name"]}
    assert pod["subdomain"] == svc["metadata"]["name"]
    # An Indexed Job's pod i is <job>-<i>; with the headless Service it resolves as <pod>.<subdomain>.
    assert env["MASTER_ADDR"] == f"{job['metadata']['name']}-0.{pod['subdomain']}"
    port = int(env["MASTER_PORT"])
    assert [p["port"] for p in svc["spec"]["ports"]] == [port]
    assert [p["containerPort"] for p in c["ports"]] == [port]
    assert "RANK=$JOB_COMPLETION_INDEX" in " ".join(c["args"])


def test_the_binary_takes_the_command_and_reads_the_variables_as_a_launch():
    job, _ = load()
    c, env = container(job)
    words = shlex.split(" ".join(c["args"]))
    binary = next(w for w in words if w.startswith("build/bin/"))
    path = os.path.join(BIN, os.path.basename(binary))
    flags = [w for w in words[words.index(binary) + 1:] if w.startswith("--")]
    helptext = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60).stdout
    for f in flags:
        assert f.split("=")[0] in helptext, f
    size = env["WORLD_SIZE"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_", "SLURM_"))}
    r = subprocess.run([path, *flags, "--show-launch"], env=dict(clean, **env, RANK="0"),
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, f"torchrun 0 {size}\n"), r.stderr
