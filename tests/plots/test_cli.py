"""The plots tools as a user runs them, each in a new interpreter: the other tests call their
main() in process (results_fixture.run_tool), so these keep the command lines themselves
tested: a real folder draws and summarises, a missing argument is one line and exit 2."""

import pytest

from results_fixture import results_folder, run_script

TOOLS = ["zbplot.py", "summary.py", "compare.py", "ab/ab.py"]


@pytest.mark.parametrize("tool", TOOLS)
def test_a_missing_argument_is_an_error(tool):
    r = run_script(tool)
    assert r.returncode == 2, r.stdout + r.stderr
    # One line naming the tool, as every zerobench tool refuses bad input (no usage block).
    name = "ab" if tool == "ab/ab.py" else tool
    assert r.stderr.startswith(f"{name}: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert r.stdout == ""


def test_a_results_folder_is_drawn_summarised_and_compared_from_the_command_line(tmp_path):
    results_folder(tmp_path)
    for tool, args in (("zbplot.py", [tmp_path]), ("summary.py", [tmp_path]),
                       ("compare.py", [tmp_path, tmp_path])):
        r = run_script(tool, *args)
        assert r.returncode == 0, (tool, r.stdout + r.stderr)
    assert (tmp_path / "summary.md").is_file() and (tmp_path / "figures").is_dir()
