"""--opprof-measure=instructions: callgrind's dumps read back, the counts' profile, the
gate at their precision, every refusal in one line, and (where valgrind is installed)
the real thing end to end. CI sets OPPROF_REQUIRE_VALGRIND=1: there the valgrind
tests fail instead of skipping."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from pytest_opprof.judge.gate import gate_config, grown, judge
from pytest_opprof.measure import callgrind as reader
from pytest_opprof.measure.measures import instructions, named
from pytest_opprof.measure.profiler import Profiler
from pytest_opprof.measure.timers import callgrind as timer_module
from pytest_opprof.model.baseline import READER, Baseline, BaselineRun
from pytest_opprof.model.conditions import BLAS_PINNING
from pytest_opprof.model.hints import Retake
from pytest_opprof.model.profile import Profile
from pytest_opprof.model.words import Unit
from pytest_opprof.run import counting
from tests.fakes import ctrl_c_as_from_a_terminal

# -- the reader --------------------------------------------------------------------------

DUMP = """# callgrind format
version: 1
creator: callgrind-3.19.0
part: {part}

desc: Timerange: Basic block 0 - 773
desc: Trigger: Client Request: opprof {label}

positions: line
events: Ir
summary: {summary}


ob=(3) /lib/libpython.so
fl=(6) ???
fn=(158) PyObject_Call
0 100
cob=(4) /lib/libnumpy.so
cfi=(13) ???
cfn=(160) DOUBLE_add
calls=1 1368
0 900
fn=(160)
0 {add}
+2 5
fn=(161) aquicksort_double
* 7
"""


def write_dumps(folder: Path, parts: dict[int, tuple[int, int]]) -> str:
    """Dump files PREFIX.<part>, one per mark label: label -> (summary, DOUBLE_add's cost)."""
    prefix = folder / "dump"
    for part, (label, (summary, add)) in enumerate(parts.items(), start=1):
        Path(f"{prefix}.{part}").write_text(DUMP.format(part=part, label=label,
                                                         summary=summary, add=add))
    return str(prefix)


def test_a_dump_is_read_as_its_label_its_count_and_its_self_costs(tmp_path):
    prefix = write_dumps(tmp_path, {7: (2000, 890)})
    label, summary, costs = reader.read_dump(f"{prefix}.1", functions_from=0)
    assert (label, summary) == (7, 2000)
    # the 900 after calls= is DOUBLE_add's inclusive cost inside PyObject_Call: not a
    # self cost; fn=(160) refers back to the name cfn= defined
    assert costs == {"PyObject_Call": 100, "DOUBLE_add": 895, "aquicksort_double": 7}


def test_marks_are_read_in_range_their_functions_from_a_mark_on_and_the_files_removed(
        tmp_path):
    prefix = write_dumps(tmp_path, {1: (10, 1), 2: (20, 2), 3: (30, 3), 9: (90, 9)})
    found = reader.read_marks(prefix, 2, 3, functions_from=3)
    assert found["summary"] == {"2": 20, "3": 30}
    assert list(found["functions"]) == ["3"]
    assert ["DOUBLE_add", 8] in found["functions"]["3"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump.1", "dump.4"]


@pytest.mark.parametrize("text, expected", [
    ("# callgrind format\nevents: Ir\n", "no summary line"),
    ("summary: lots\n", "not a callgrind dump"),
])
def test_a_broken_dump_is_one_line_naming_its_file(tmp_path, text, expected):
    (tmp_path / "dump.1").write_text(text)
    with pytest.raises(reader.DumpError, match=expected) as info:
        reader.read_dump(str(tmp_path / "dump.1"), 0)
    assert str(tmp_path / "dump.1") in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.pytester
def test_the_reader_as_a_script_prints_json_or_the_error(tmp_path):
    prefix = write_dumps(tmp_path, {1: (10, 1), 2: (20, 2)})
    script = [sys.executable, "-I", reader.__file__]
    done = subprocess.run([*script, prefix, "1", "2", "2"], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0 and json.loads(done.stdout)["summary"] == {"1": 10, "2": 20}
    (tmp_path / "dump.9").write_text("summary: x\n")
    done = subprocess.run([*script, str(tmp_path / "dump"), "1", "9", "9"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "not a callgrind dump" in json.loads(done.stdout)["error"]


# -- the timer and the profile it makes (client requests faked: no valgrind needed) --------

class FakeRequests:
    """_callgrind's API: marks numbered from 1, instrumentation switched."""

    def __init__(self) -> None:
        self.k = 0
        self.on = False

    def mark(self) -> int:
        self.k += 1
        return self.k

    def start(self) -> None:
        self.on = True

    def stop(self) -> None:
        self.on = False

    def last(self) -> int:
        return self.k

    def running(self) -> bool:
        return True


def counting_timer(monkeypatch, interval: dict[int, int], functions=None):
    """A CallgrindTimer whose dumps say ``interval[k]`` instructions for mark k."""
    requests = FakeRequests()
    monkeypatch.setattr(timer_module, "extension", lambda: requests)

    def read(prefix, first, last, functions_from):
        assert not requests.on, "the dumps are read with instrumentation off"
        split = {k: v for k, v in (functions or {}).items() if k >= functions_from}
        return timer_module.Dumps({k: interval.get(k, 1) for k in range(first, last + 1)},
                                  split)

    monkeypatch.setattr(timer_module, "read", read)
    return timer_module.CallgrindTimer("/nowhere/dump"), requests


def test_marks_become_instruction_counts_in_every_array_of_the_profile(monkeypatch):
    # marks per iteration: 1 open, 2 enter a, 3 enter b, 4 exit b, 5 exit a, 6 close;
    # the phase's marks come in between them
    timer, requests = counting_timer(monkeypatch, {})
    profiler = Profiler(timer, skip=1, nodeid="t", measure="instructions")
    for _ in profiler.iterations(2):
        assert requests.on
        with profiler.phase("forward"), profiler.op("a"), profiler.op("b"):
            pass
    assert not requests.on, "instrumentation ends with the loop"
    profile = profiler.profile
    assert profile is not None and profile.measure == "instructions"
    assert profile.unit is Unit.COUNT
    # every interval is 1 instruction: an op's count is the marks between its entry and exit
    a, b = profile.ops[0].op_id, profile.ops[1].op_id
    assert profile.samples[:, b].tolist() == [1, 1]
    assert profile.samples[:, a].tolist() == [3, 3]  # b's entry, b, b's exit
    assert profile.phase_samples[:, 0].tolist() == [5, 5]
    assert profile.wall.tolist() == [7, 7] and profile.op_time.tolist() == [3, 3]


def test_skipped_iterations_are_neither_instrumented_nor_dumped(monkeypatch):
    timer, requests = counting_timer(monkeypatch, {})
    timer.skip = 1
    profiler = Profiler(timer, skip=1)
    seen = []
    for _ in profiler.iterations(3):
        seen.append(requests.on)
        with profiler.op("a"):
            pass
    assert seen == [False, True, True]
    profile = profiler.profile
    # iteration 0's marks (1-3) were numbered, not dumped: 0; then 1 instruction a mark
    assert profile.samples[:, 0].tolist() == [0, 1, 1]
    assert profile.counted_samples()[0].tolist() == [1, 1]


def test_an_op_counts_the_intervals_between_its_marks_and_names_its_functions(monkeypatch):
    # iteration 2 (the last) has marks 5..8: open, enter, exit, close
    timer, _ = counting_timer(monkeypatch, {6: 100, 7: 5000, 3: 4000},
                              {7: [("DOUBLE_add", 4000), ("PyObject_Call", 900)],
                               8: [("other", 3)]})
    profiler = Profiler(timer, skip=1, nodeid="t")
    for _ in profiler.iterations(2):
        with profiler.op("add"):
            pass
    profile = profiler.profile
    assert profile.samples[:, 0].tolist() == [4000, 5000]
    assert profile.op_functions == [[("DOUBLE_add", 4000), ("PyObject_Call", 900)]]
    again = Profile.from_json(profile.to_json())
    assert again.op_functions == profile.op_functions and again.measure == "instructions"


def test_a_missing_dump_is_one_error_line_naming_the_mark(monkeypatch):
    from pytest_opprof.errors import OpprofError

    timer, _ = counting_timer(monkeypatch, {})
    monkeypatch.setattr(timer_module, "read", lambda *a: timer_module.Dumps({}, {}))
    profiler = Profiler(timer, skip=1)
    for _ in profiler.iterations(2):
        with profiler.op("a"):
            pass
    with pytest.raises(OpprofError, match=r"callgrind wrote no dump for mark 2 under "
                                          r"/nowhere/dump") as info:
        _ = profiler.profile
    assert "\n" not in str(info.value)


def test_no_folder_for_the_dumps_is_one_line_and_nothing_counted(pytester, monkeypatch):
    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/tmp")

    monkeypatch.setattr(counting.tempfile, "TemporaryDirectory", refused)
    share = counting.run_child(pytester.parseconfig(), ["t.py::t"], 1, instructions.Instructions)
    assert share.problem.startswith("the callgrind child could not run: [Errno 13] "
                                    "Permission denied")
    assert share.profiles == {}


def test_the_loop_runs_at_most_its_cap():
    from pytest_opprof.measure.timers import CpuTimer

    profiler = Profiler(CpuTimer(), skip=1, cap=4)
    assert sum(1 for _ in profiler.iterations(30)) == 4
    assert sum(1 for _ in Profiler(CpuTimer(), skip=1, cap=4).iterations(3)) == 3


@pytest.mark.parametrize("functions, problem", [
    ([[["f", -1]]], "whole number"), ([[["", 3]]], "non-empty string"),
    ([[["f", 1, 2]]], "pair"), ([[], []], "entries for 1 ops"),
])
def test_a_profile_with_bad_functions_is_refused_in_one_line(functions, problem):
    data = counted_profile([1000.0]).to_dict()
    data["op_functions"] = functions
    with pytest.raises(Exception, match=problem) as info:
        Profile.from_dict(data)
    assert "\n" not in str(info.value)


# -- the gate at the counts' precision ------------------------------------------------------

def counted_profile(counts_per_op: list[float], functions=None, names=None) -> Profile:
    """A profile of the instructions measure: one op per count, 1 skipped + 3 counted
    iterations, each iteration counting exactly that."""
    from pytest_opprof.model.profile import OpInfo

    names = names or [f"op{k}" for k in range(len(counts_per_op))]
    samples = np.tile(np.array(counts_per_op, dtype=float), (4, 1))
    return Profile(nodeid="t.py::t", measure="instructions", unit=Unit.COUNT,
                   device="callgrind (x86_64)", skip=1,
                   ops=[OpInfo(k, n, 0, 0, None) for k, n in enumerate(names)],
                   samples=samples, phase_samples=np.zeros((4, 0)), phases=[],
                   wall=samples.sum(axis=1), op_time=samples.sum(axis=1),
                   op_functions=functions)


def baseline_of(*profiles: Profile) -> Baseline:
    return Baseline("t.py::t", "callgrind-x86_64",
                    [BaselineRun.from_profile(p, {}) for p in profiles])


def judged(current: Profile, base: Baseline, tolerance: float = 0.01):
    return judge(current, base, machine="callgrind-x86_64", retake=Retake(),
                 config=gate_config(named("instructions").gate, tolerance, {}), budgets={},
                 strict_ops=False)


COUNTS = [20_000.0, 150_000.0, 1_500_000.0, 9_000_000.0, 60_000.0, 400_000.0]


def test_one_percent_more_instructions_in_one_op_fails_that_op_only():
    base = baseline_of(*[counted_profile(COUNTS)] * 3)
    grown_counts = list(COUNTS)
    grown_counts[2] *= 1.012
    result = judged(counted_profile(grown_counts), base)
    assert result.failed
    assert [v.name for v in result.at_fault] == ["op2"]
    assert result.comparison.drift_source == "none"
    assert judged(counted_profile([c * 1.005 if k == 2 else c for k, c in enumerate(COUNTS)]),
                  base).verdict == "passed"


def test_every_op_growing_together_is_a_change_of_the_code_not_a_drift():
    base = baseline_of(counted_profile(COUNTS))
    result = judged(counted_profile([c * 1.03 for c in COUNTS]), base)
    assert sorted(v.name for v in result.at_fault) == [f"op{k}" for k in range(len(COUNTS))]
    assert result.comparison.drift == 1.0


def test_a_growth_under_the_floor_of_instructions_does_not_fail():
    base = baseline_of(counted_profile([2_000.0] * 6))
    assert not judged(counted_profile([2_030.0] * 6), base).failed  # +1.5%: 30 instructions


def test_a_regressed_op_names_the_functions_that_grew_most():
    before = [[("DOUBLE_add", 1_000_000), ("PyObject_Call", 400_000), ("memcpy", 100_000)]]
    after = [[("DOUBLE_add", 1_300_000), ("PyObject_Call", 400_010), ("npy_sort", 50_000)]]
    base = baseline_of(counted_profile([1_500_000.0], before))
    result = judged(counted_profile([1_750_000.0], after), base)
    (v,) = result.at_fault
    assert v.grew == (("DOUBLE_add", 1e6, 1.3e6), ("npy_sort", 0.0, 5e4),
                      ("PyObject_Call", 4e5, 400_010.0))
    assert type(v).from_dict(v.to_dict()) == v


def test_grown_lists_only_functions_that_grew():
    assert grown({"a": 5, "b": 5}, {"a": 4, "b": 9}) == (("b", 5.0, 9.0),)
    assert grown({"a": 5}, {"a": 5}) == ()


def test_a_baseline_keeps_each_ops_functions_and_reads_them_back():
    functions = [[("DOUBLE_add", 1_000)], [("f", 7)]]
    base = baseline_of(counted_profile([10.0, 20.0], functions))
    again = READER.parse(base.dumps(), "b.json")
    assert again.functions() == {("op0", 0): {"DOUBLE_add": 1_000}, ("op1", 0): {"f": 7}}
    broken = json.loads(base.dumps())
    broken["runs"][0]["functions"] = [[["f", "many"]]]
    with pytest.raises(Exception, match=r"one entry per op|whole number"):
        READER.parse(json.dumps(broken), "b.json")


def test_compare_judges_counts_from_one_pair_and_says_their_unit():
    from pytest_opprof.judge.comparison import compare_runs

    base = counted_profile(COUNTS)
    head = counted_profile([c * (1.02 if k == 1 else 1.0) for k, c in enumerate(COUNTS)])
    report = compare_runs([{"t.py::t": base}], [{"t.py::t": head}], mode="files",
                          labels=("a", "b"), tolerance=0.01)
    assert (report.measure, report.unit) == ("instructions", Unit.COUNT)
    (test,) = report.tests
    assert [row.name for row in test.ops if row.change.verdict == "regressed"] == ["op1"]
    assert test.result.common == (1.0,) and test.result.shared is None
    # every op 3% more: the code's change, each op regressed
    head = counted_profile([c * 1.03 for c in COUNTS])
    report = compare_runs([{"t.py::t": base}], [{"t.py::t": head}], mode="files",
                          labels=("a", "b"), tolerance=0.01)
    assert report.count("regressed") == len(COUNTS)


def test_judge_counts_widens_to_what_its_pairs_show():
    from pytest_opprof.judge.paired import COUNT_SPREAD_FLOOR, judge_counts

    base = np.array([[1000.0, 2000.0], [1000.0, 2000.0]])
    steady = judge_counts(base, base * [1.015, 1.0], 0.01)
    assert steady.ops[0].verdict == "regressed" and steady.ops[0].sd == COUNT_SPREAD_FLOOR
    noisy = judge_counts(base, base * [[1.0, 1.0], [1.03, 1.0]], 0.01)
    assert noisy.ops[0].verdict == "ok" and noisy.ops[0].sd > 0.02


def test_a_test_whose_counts_vary_between_iterations_is_named_once():
    profile = counted_profile(COUNTS)
    unsteady = instructions.Instructions.unsteady
    assert unsteady(profile) is None
    profile.samples[2, 0] *= 1.03  # 600 instructions: the allocator, not a thread
    assert unsteady(profile) is None
    profile.samples[2, 3] *= 1.02
    line = unsteady(profile)
    assert line == "op op3 counted +2.0% more instructions in one counted iteration than in " \
        "another"
    assert "not deterministic" in instructions.Instructions.unsteady_words


def test_a_baseline_of_another_valgrind_is_refused_naming_it():
    from pytest_opprof.model.conditions import difference

    now = {"measure": "instructions", "valgrind": "3.19.0", "python": "3.11.7"}
    line = difference({**now, "valgrind": "3.18.1"}, now, Retake())
    assert line.startswith("the baseline's valgrind was 3.18.1, this run's is 3.19.0")


class _Item:
    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self.fixturenames = ["gpu_profiler"]


def test_a_worker_judges_a_test_that_another_workers_child_counted(monkeypatch, tmp_path):
    counted = {f"t.py::t{k}": counted_profile(COUNTS) for k in range(4)}
    for nodeid, profile in counted.items():
        profile.nodeid = nodeid

    class Config:
        workerinput: ClassVar = {"workerid": "gw1", "workercount": 2,
                                 counting.FOLDER_KEY: str(tmp_path)}

    asked = []

    def child(config, nodeids, skip, measure, folder):
        asked.append((list(nodeids), folder))
        return counting.Share({n: counted[n] for n in nodeids})

    monkeypatch.setattr(counting, "run_child", child)
    mine = counting.Counting(Config(), 1, instructions.Instructions)
    mine.count([_Item(n) for n in counted])
    # every second one, from its number; the child's folders in the run's
    assert asked == [(["t.py::t1", "t.py::t3"], tmp_path)]
    assert (tmp_path / "share-1.json").is_file()
    # worker gw0's share appears once its child is done
    other = counting.Share({n: counted[n] for n in ("t.py::t0", "t.py::t2")})
    (tmp_path / "share-0.json").write_text(other.to_json())
    found, why = mine.profile("t.py::t2")
    assert why == "" and found.samples.tolist() == counted["t.py::t2"].samples.tolist()
    assert mine.profile("t.py::t9") == (None, "no instructions counted: it was not "
                                              "collected before the run started")


# -- options and refusals ------------------------------------------------------------------

def run_inline(pytester, *args):
    pytester.makepyfile(test_one="def test_one(gpu_profiler):\n"
                                 "    for _ in gpu_profiler.iterations(3):\n"
                                 "        with gpu_profiler.op('a'):\n            pass\n")
    return pytester.runpytest_subprocess(*args)


def test_no_valgrind_on_path_is_one_usage_line_saying_how_to_get_it(pytester, monkeypatch):
    bin_dir = pytester.mkdir("bin")
    os.symlink(sys.executable, bin_dir / "python")
    monkeypatch.setenv("PATH", str(bin_dir))
    result = run_inline(pytester, "--opprof-measure=instructions")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --opprof-measure=instructions: needs valgrind on PATH: "
                                 "install valgrind (Debian/Ubuntu: apt-get install valgrind*"])
    assert "Traceback" not in result.stderr.str()


def test_an_old_valgrind_and_a_build_without_headers_are_refused(monkeypatch):
    monkeypatch.setattr(instructions.sys, "platform", "linux")
    monkeypatch.setattr(instructions, "valgrind_version", lambda: (3, 12, 0))
    assert "needs valgrind 3.16 or newer, found 3.12.0" in instructions.problem()
    monkeypatch.setattr(instructions, "valgrind_version", lambda: (3, 19, 0))
    monkeypatch.setattr(instructions, "extension", lambda: None)
    problem = instructions.problem()
    assert "built without valgrind's headers (valgrind/callgrind.h)" in problem
    assert "pip install --force-reinstall" in problem


def test_the_tolerance_defaults_to_one_percent_under_instructions(pytester):
    from pytest_opprof.run.options import Settings

    config = pytester.parseconfig("--opprof-measure=instructions")
    assert Settings.from_pytest_config(config).tolerance == 0.01
    config = pytester.parseconfig("--opprof-measure=instructions", "--opprof-tolerance=3%")
    assert Settings.from_pytest_config(config).tolerance == 0.03
    assert Settings.from_pytest_config(pytester.parseconfig()).tolerance == 0.05


def test_the_child_keeps_the_users_hash_seed_and_threads_or_pins_them():
    assert instructions.child_environment({}) == {
        "PYTHONHASHSEED": "0", **dict.fromkeys(BLAS_PINNING, "1")}
    assert instructions.child_environment({"PYTHONHASHSEED": "7", "OMP_NUM_THREADS": "2"}) == {}


# -- the real thing (valgrind) ---------------------------------------------------------------

def need_valgrind() -> None:
    problem = instructions.problem()
    if problem is None:
        return
    if os.environ.get(instructions.REQUIRE_VARIABLE, "") not in ("", "0"):
        pytest.fail(f"{instructions.REQUIRE_VARIABLE} is set but: {problem}")
    pytest.skip(problem)


#: Two tests of a few small numpy ops; SORT_N makes `sort` do more work.
WORKLOAD = """
import os
import numpy as np


def test_ops(gpu_profiler):
    n = int(os.environ.get("SORT_N", "4000"))
    a = np.random.default_rng(0).standard_normal(n)
    b = np.random.default_rng(1).standard_normal(4000)
    for _ in gpu_profiler.iterations(20):
        with gpu_profiler.op("sort"):
            np.sort(a)
        with gpu_profiler.op("exp"):
            np.exp(b)
        with gpu_profiler.op("outer"):
            with gpu_profiler.op("cumsum"):
                np.cumsum(b)
        with gpu_profiler.op("sum"):
            b.sum()


def test_not_profiled():
    assert True
"""


@pytest.mark.e2e
def test_a_two_percent_bigger_sort_fails_its_test_naming_sort_and_its_functions(
        pytester, monkeypatch):
    need_valgrind()
    pytester.makepyfile(test_work=WORKLOAD)
    first = pytester.runpytest_subprocess("--opprof-measure=instructions",
                                          "--opprof-update-baseline", "-p", "no:randomly")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(["opprof: measure instructions (per-op instructions executed, "
                                "counted by callgrind*cannot see memory-bound effects*",
                                "*counting instructions of 1 profiled test(s)*",
                                "*test_ops: baseline updated"])
    stored = json.loads(next(Path(pytester.path, ".opprof").rglob("*.json")).read_text())
    assert stored["machine"] == "callgrind-x86_64"
    conditions = stored["runs"][0]["meta"]["conditions"]
    assert conditions["measure"] == "instructions" and conditions["PYTHONHASHSEED"] == "0"
    assert stored["runs"][0]["meta"]["counted"] == instructions.COUNTED

    same = pytester.runpytest_subprocess("--opprof-measure=instructions", "-p", "no:randomly",
                                         "--opprof-json=same.json")
    same.assert_outcomes(passed=2)
    profile = json.loads(Path(pytester.path, "same.json").read_text())["tests"][0]["profile"]
    assert profile["measure"] == "instructions"

    monkeypatch.setenv("SORT_N", "4080")
    slower = pytester.runpytest_subprocess("--opprof-measure=instructions", "-p", "no:randomly",
                                           "--opprof-json=slower.json", "--junitxml=j.xml")
    slower.assert_outcomes(failed=1, passed=1)
    slower.stdout.fnmatch_lines(["*OP_ID0. sort: *instr*", "*grew: *",
                                 "To accept: opprof baseline update test_work.py::test_ops "
                                 "--opprof-measure=instructions"])
    data = json.loads(Path(pytester.path, "slower.json").read_text())
    ops = data["tests"][0]["result"]["comparison"]["ops"]
    regressed = [op for op in ops if op["verdict"] == "regressed"]
    assert [op["name"] for op in regressed] == ["sort"]
    assert regressed[0]["grew"], "the functions whose instructions grew are named"
    assert data["tests"][0]["unit"] == "count"
    junit = Path(pytester.path, "j.xml").read_text()
    (line,) = re.findall(r'name="opprof_regressed" value="([^"]*)"', junit)
    assert line.startswith("OP_ID0. sort: ") and "instr" in line and " us " not in line

    # a baseline counted under another valgrind cannot judge these counts: one line
    path = next(Path(pytester.path, ".opprof").rglob("*.json"))
    stored["runs"][0]["meta"]["conditions"]["valgrind"] = "3.16.1"
    path.write_text(json.dumps(stored))
    other = pytester.runpytest_subprocess("--opprof-measure=instructions", "-p", "no:randomly")
    other.assert_outcomes(passed=2)
    installed = instructions.version_text(instructions.valgrind_version())
    other.stdout.fnmatch_lines(["*test_ops: unjudged; the baseline's valgrind was 3.16.1, "
                                f"this run's is {installed}*"])


@pytest.mark.e2e
def test_xdist_workers_each_count_their_share_in_one_child(pytester):
    need_valgrind()
    pytester.makepyfile(test_a=WORKLOAD, test_b=WORKLOAD)
    result = pytester.runpytest_subprocess("--opprof-measure=instructions", "-n", "2",
                                           "--opprof-update-baseline", "-p", "no:randomly")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*test_a.py::test_ops: baseline updated",
                                 "*test_b.py::test_ops: baseline updated"])


#: A test that ends its own process under valgrind (as the out-of-memory killer would)
#: or fails there only.
UNDER_VALGRIND = """
import os
import signal


def test_ops(gpu_profiler):
    if os.environ.get("OPPROF_CALLGRIND_OUT"):
        if os.environ.get("HOW") == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("only under valgrind")
    for _ in gpu_profiler.iterations(3):
        with gpu_profiler.op("a"):
            pass
"""


@pytest.mark.e2e
@pytest.mark.parametrize("how, line", [
    ("kill", "*no instructions counted: the callgrind child was ended by SIGKILL "
             "(out of memory?)*"),
    ("fail", "*no instructions counted: it failed under callgrind: AssertionError: only under "
             "valgrind"),
])
def test_a_child_that_dies_or_fails_leaves_its_tests_unjudged_in_one_line(
        pytester, monkeypatch, how, line):
    need_valgrind()
    monkeypatch.setenv("HOW", how)
    pytester.makepyfile(test_die=UNDER_VALGRIND)
    result = pytester.runpytest_subprocess("--opprof-measure=instructions", "-p", "no:randomly",
                                           "--opprof-update-baseline")
    result.assert_outcomes(passed=1)  # natively the test passes: its outcome is its own
    result.stdout.fnmatch_lines([line, "opprof: 1 profiled test(s) passed but their baselines "
                                       "were not stored*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # it stored nothing
    assert not Path(pytester.path, ".opprof").exists()
    # no figure of native times said as counts ("counted +342.7% more instructions")
    assert "more instructions" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str()


@pytest.mark.e2e
def test_ctrl_c_during_the_child_ends_it_and_writes_nothing(pytester):
    need_valgrind()
    pytester.makepyfile(test_work=WORKLOAD)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--opprof-measure=instructions",
         "--opprof-update-baseline", "-p", "no:randomly"], cwd=pytester.path,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=ctrl_c_as_from_a_terminal)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _valgrind_children(proc.pid):
        time.sleep(0.1)
    assert _valgrind_children(proc.pid), "the callgrind child started"
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "KeyboardInterrupt" in output
    assert not Path(pytester.path, ".opprof").exists()
    assert not _valgrind_children(proc.pid)


def _valgrind_children(pid: int) -> list[int]:
    """Processes descended from ``pid`` that run callgrind (other tests' are not)."""
    if shutil.which("ps") is None:
        pytest.skip("ps is not installed")
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for line in subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True,
                               text=True, check=False).stdout.splitlines():
        child, parent, *args = line.split(None, 2)
        parents[int(child)], commands[int(child)] = int(parent), " ".join(args)

    def descends(p: int) -> bool:
        for _ in range(64):
            if p == pid:
                return True
            if p not in parents or p <= 1:
                return False
            p = parents[p]
        return False

    return [p for p, args in commands.items()
            if p != pid and "callgrind" in args and descends(p)]


@pytest.mark.e2e
def test_opprof_baseline_update_takes_two_runs_of_counts_by_default(pytester, monkeypatch,
                                                                    capsys):
    from pytest_opprof.cli import main

    need_valgrind()
    pytester.makepyfile(test_work=WORKLOAD)
    monkeypatch.chdir(pytester.path)
    assert main(["baseline", "update", "-q", "-p", "no:randomly",
                 "--opprof-measure=instructions"]) == 0
    out = capsys.readouterr().out
    assert "opprof: baseline run 2 of 2: pytest --opprof-update-baseline=replace" in out
    assert "baseline run 3" not in out
    (path,) = Path(pytester.path, ".opprof", "callgrind-" + os.uname().machine).glob("*.json")
    runs = json.loads(path.read_text())["runs"]
    assert len(runs) == 2 and all(run["functions"] for run in runs)
