"""Issue 20, section 2, the store's classes: writes that destroy or half-write what the
user had (1), prune deleting live baselines (2), the plugin writing what its own readers
refuse (5), exceptions outside the one-line handling (6: huge integers, a stdout that
cannot encode a name, unbounded counts) and data printed raw (9)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from pytest_opprof.cli import main
from pytest_opprof.model import jsontext


def opprof(*args: str, cwd, env=None) -> subprocess.CompletedProcess:
    """The opprof command as a user runs it: a new process."""
    return subprocess.run([sys.executable, "-m", "pytest_opprof.cli", *args], cwd=cwd,
                          capture_output=True, text=True, check=False, env=env)


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


# -- class 6: one parse path; any encoding; bounded counts ----------------------------

@pytest.mark.parametrize("text, says", [
    (b"\xff{}", "not UTF-8 text"),
    ("{", "not JSON ("),
    ("[" * 100_000, "not JSON (nested too deeply)"),
    ('{"skip": ' + "9" * 5000 + "}", "holds an integer of thousands of digits"),
])
def test_every_reader_parses_json_one_way(text, says):
    with pytest.raises(jsontext.JSONProblem, match=re.escape(says)):
        jsontext.loads(text)


@pytest.fixture
def results_file(pytester):
    """A results file of one profiled test (the fake backend), and the project."""
    pytester.makeini("[pytest]\nopprof_backend = fake\n")
    pytester.makepyfile(test_one="""
        def test_a(gpu_profiler):
            dev = gpu_profiler.timer.device_model
            for _ in gpu_profiler.iterations(4):
                with gpu_profiler.op("matmul"):
                    dev.kernel(10_000)
        """)
    assert pytester.runpytest("-p", "no:randomly", "--opprof-json=r.json").ret == 0
    return pytester.path / "r.json"


@pytest.mark.parametrize("where", ["skip", "a sample", "the machine"])
def test_a_5000_digit_integer_is_one_line_in_report_and_compare(results_file, capsys, where):
    """The results loader reads through the baseline loader's parse path: the same line."""
    data = json.loads(results_file.read_text())
    marker = 12345678987654321
    profile = data["tests"][0]["profile"]
    if where == "skip":
        profile["skip"] = marker
    elif where == "a sample":
        profile["samples_ns"][0][0] = marker
    else:
        data["machine"]["x"] = marker
    forged = json.dumps(data).replace(str(marker), "9" * 5000)
    bad = results_file.with_name("bad.json")
    bad.write_text(forged)
    for argv in (["report", str(bad), "-o", str(bad.with_name("x.html"))],
                 ["compare", str(bad), str(results_file)]):
        assert main(argv) == 1
        err = one_line(capsys.readouterr().err)
        assert err.startswith(f"opprof: {bad}: holds an integer of thousands of digits"), err


def test_a_name_the_terminal_cannot_encode_is_printed_escaped(results_file):
    """PYTHONIOENCODING=ascii (or LANG=C): an op named 注意力 is printed backslash-escaped
    by every command, never a UnicodeEncodeError."""
    data = json.loads(results_file.read_text())
    for test in data["tests"]:
        for op in test["profile"]["ops"]:
            op["name"] = "注意力"
    results_file.write_text(json.dumps(data))
    import os
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    done = opprof("compare", str(results_file), str(results_file), cwd=results_file.parent,
                  env=env)
    assert done.returncode == 0, done.stderr
    assert "\\u6ce8\\u610f\\u529b" in done.stdout and "Traceback" not in done.stderr


@pytest.mark.parametrize("argv, says", [
    (["baseline", "update", "--runs", "1000000000000"],
     "--runs must be a whole number from 1 to 20 (a baseline keeps the last 20 runs)"),
    (["baseline", "update", "--runs", "9" * 5000], "--runs must be a whole number from 1 to 20"),
    (["compare", "HEAD", "--pairs", "1000000000000"],
     "--pairs must be a whole number from 1 to 1000"),
    (["compare", "HEAD", "--max-pairs", "1001"],
     "--max-pairs must be a whole number from 1 to 1000"),
])
def test_every_count_argument_is_bounded(capsys, argv, says):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert says in capsys.readouterr().err.strip().splitlines()[-1]
