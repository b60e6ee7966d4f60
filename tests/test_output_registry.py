"""The output registry (``run.outputs.RUN_OUTPUTS``): an output of a pytest run is one
entry there and its renderer. A toy CSV output, added here and nowhere in the package,
gets its flag and help, its start-up check, its file and its place among the flags the
confirmation re-run leaves out."""

from __future__ import annotations

import pytest

from pytest_opprof.run import outputs, rerun

from .fakes import SIX_OP_NET, batch


def _csv(results: outputs.Results) -> str:
    """One line per profiled test: its node id and its ops."""
    return "".join(f"{r.nodeid},{len(r.profile.ops)}\n" for r in results.records)


CSV = outputs.RunOutput("--opprof-csv", "PATH", "write one line per profiled test to PATH",
                        _csv)


@pytest.fixture
def toy(pytester, monkeypatch):
    """The registry with the CSV output; the six-op net on the fake backend."""
    monkeypatch.setattr(outputs, "RUN_OUTPUTS", (*outputs.RUN_OUTPUTS, CSV))
    monkeypatch.delenv("SLOW", raising=False)
    pytester.makepyfile(test_net=SIX_OP_NET)
    pytester.makeini("[pytest]\nopprof_measure = fake\n")
    return pytester


def test_a_registered_output_has_its_flag_its_check_and_its_file(toy):
    toy.runpytest("--help").stdout.fnmatch_lines(
        ["*--opprof-csv=PATH*write one line per profiled test to PATH*"])
    toy.runpytest("--opprof-csv=out/r.csv").assert_outcomes(passed=1)
    assert (toy.path / "out" / "r.csv").read_text() == "test_net.py::test_net,6\n"
    bad = toy.runpytest("--opprof-csv=/dev/null")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["ERROR: opprof: --opprof-csv=/dev/null: names a device or "
                              "process file, not a file to write; name a regular file"])
    clashing = toy.runpytest("--opprof-csv=r.txt", "--opprof-markdown=r.txt")
    clashing.stderr.fnmatch_lines(["ERROR: opprof: --opprof-csv=*r.txt: is also "
                                   "--opprof-markdown's file; give each output its own"])


def test_the_rerun_drops_a_registered_output_from_the_command_line_and_addopts(toy):
    toy.makeini("[pytest]\nopprof_measure = fake\naddopts = --opprof-csv a.csv -p no:randomly\n")
    config = toy.parseconfig("--opprof-csv", "r.csv", "-k", "net", "test_net.py")
    assert rerun.user_args(config)[:2] == ["-k", "net"]
    assert rerun.selection_free(config)[0] == ["-o", "addopts=-p no:randomly"]


@pytest.mark.rerun
def test_a_rerun_confirms_where_the_child_does_not_know_the_output(toy, monkeypatch):
    """The child is a new process, where the toy is not registered: had the re-run kept
    --opprof-csv (given, or in addopts), the child would refuse it and confirm nothing."""
    toy.makeini("[pytest]\nopprof_measure = fake\naddopts = --opprof-csv=a.csv\n")
    with batch("b"):
        for _ in range(2):
            assert toy.runpytest("-p", "no:randomly", "--opprof-update-baseline").ret == 0
    monkeypatch.setenv("SLOW", "relu:1.5")
    result = toy.runpytest("-p", "no:randomly", "--opprof-csv=r.csv")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["opprof: re-running test_net.py::test_net *",
                                 "*confirmed by a re-run in a new process*"])
    assert (toy.path / "r.csv").read_text() == "test_net.py::test_net,6\n"
