"""The architecture as the includes show it: each folder of harness/ uses only the layers below
it, the kernels only the status type, and nothing below bench/ reaches into it."""
import os
import re

import pytest

ROOT = os.environ.get("ZB_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)  # ours; <...> are libraries

# Bottom to top; each layer may include itself and the layers listed for it.
ALLOWED = {
    "harness/core": {"harness/core", "kernels"},
    "harness/comm": {"harness/comm", "harness/core", "kernels"},
    "harness/compute": {"harness/compute", "harness/core", "kernels"},
    "harness/zero": {"harness/zero", "harness/compute", "harness/comm", "harness/core", "kernels"},
    "harness/predict": {"harness/predict", "harness/zero", "harness/compute", "harness/comm",
                        "harness/core", "kernels"},
    "harness/driver": {"harness/driver", "harness/zero", "harness/compute", "harness/comm",
                       "harness/core", "kernels"},
}


def sources(folder):
    base = os.path.join(ROOT, folder)
    for name in sorted(os.listdir(base)):
        if name.endswith((".h", ".cc", ".cu")):
            yield os.path.join(folder, name), open(os.path.join(base, name), encoding="utf-8").read()


def owner(path):
    """The folder an included path lives in: "harness/zero/stage.h" -> "harness/zero"."""
    parts = path.split("/")
    return "/".join(parts[:2]) if parts[0] == "harness" else parts[0]


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_each_harness_layer_includes_only_layers_below_it(layer):
    for path, text in sources(layer):
        for inc in INCLUDE.findall(text):
            assert owner(inc) in ALLOWED[layer], f"{path} includes {inc}"


def test_harness_has_no_loose_files_and_no_other_folders():
    entries = [e for e in os.listdir(os.path.join(ROOT, "harness")) if e != "CMakeLists.txt"]
    assert sorted(f"harness/{e}" for e in entries) == sorted(ALLOWED)


def test_kernels_use_only_the_status_type():
    for path, text in sources("kernels"):
        for inc in INCLUDE.findall(text):
            assert inc.startswith("kernels/") or inc == "harness/core/status.h", f"{path} includes {inc}"


def test_the_checker_itself_fails_on_an_upward_include():
    # A zero/ file including the driver must be caught: the rule is not vacuous.
    assert owner("harness/driver/driver.h") not in ALLOWED["harness/zero"]
    assert owner("bench/zero_bench.h") not in ALLOWED["harness/zero"]
