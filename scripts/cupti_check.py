"""Kernel time (CUPTI) on a real GPU: spread, gate, overhead and accuracy, in one run.

    python scripts/cupti_check.py [--out DIR] [--dry-run]

For a session that has a GPU (issue 12, item 8). Steps, each writing its figures to
DIR (default $OUT, else ./cupti_check_out) as cupti_check.md, and everything the
pytest runs printed as cupti_check.log:

1. install the ``cupti`` extra from wheels carried in ``.whl/`` (the device machine
   has no index) into /tmp/site, unless cupti-python already imports;
2. the example suite once with ``--opprof-measure=kernel`` (header and outcome);
3. a many-op CuPy test of its own (16 ops: compute-bound, launch-bound, copies, a
   memset, reductions), each run in its own pytest process: a 4-run baseline, 5 A/A
   runs, then +5% and +12.5% injected into a compute-bound op (a 4096x4096 matmul, by
   an extra matmul of 5% / 12.5% of its rows) and a launch-bound op (40 launches of
   ``v * 3`` on 4096 floats, by 2 / 5 more launches);
4. tables: per op, the between-process spread of the kernel-time median and of the
   event span's (the same runs); A/A false failures; which injections were caught;
   host cost per op (bare, two events per op, one event per boundary, kernel
   measure); kernel-time medians against ``cupyx.profiler.benchmark`` for kernels of
   10 us to 10 ms.

``--dry-run`` does the same on the fake device and the fake CUPTI (no GPU, no
install, fewer runs, no accuracy table): tests/test_cupti.py runs it so that the
script cannot rot. Never part of the test suite otherwise.

The wheels, fetched where pip works (Python 3.12 on the device machine; see
/work/.library/device/README.md), into .whl/ (ignored by git):

    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \\
        --implementation cp --platform manylinux_2_28_x86_64 --platform \\
        manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 -d .whl \\
        cupti-python pyelftools nvidia-cuda-cupti

then, with ``.whl`` carried: ``PYTHONUNBUFFERED=1 python3 scripts/cupti_check.py``
(about 4 minutes on an H200).
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata
import importlib.util
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SITE = "/tmp/site"
COMPUTE_OP, LAUNCH_OP = "matmul_4096", "scale_4096_x40"
INJECTIONS = ((COMPUTE_OP, 1.05), (COMPUTE_OP, 1.125), (LAUNCH_OP, 1.05), (LAUNCH_OP, 1.125))
SLOW_ENV = "CUPTI_CHECK_SLOW"
#: pytest_opprof.run.options.BATCH_VARIABLE (read here before the package is installed).
BATCH_VARIABLE = "PYTEST_OPPROF_BATCH"

#: The many-op test on CuPy. CUPTI_CHECK_SLOW="op:factor" slows one op.
MANY_OPS_CUDA = '''
import os

import numpy as np

SLOW = dict(p.split(":") for p in filter(None, os.environ.get("CUPTI_CHECK_SLOW", "").split(",")))


def factor(name):
    return float(SLOW.get(name, 1.0))


def test_many_ops(gpu_profiler):
    cp = gpu_profiler.xp
    rng = cp.random.default_rng(0)
    big = rng.standard_normal((4096, 4096), dtype=cp.float32)
    small = rng.standard_normal((256, 256), dtype=cp.float32)
    v = rng.standard_normal(4096, dtype=cp.float32)
    w = rng.standard_normal(16 * 2**20, dtype=cp.float32)
    m = rng.standard_normal(2**20, dtype=cp.float32)
    host = np.ones(2**20, dtype=np.float32)
    extra_rows = round(4096 * (factor("matmul_4096") - 1))
    launches = round(40 * factor("scale_4096_x40"))

    def matmul_4096():
        big @ big
        if extra_rows:
            big[:extra_rows] @ big

    ops = {
        "matmul_4096": matmul_4096,
        "scale_4096_x40": lambda: [v * 3 for _ in range(launches)],
        "norm_4096_x8": lambda: [cp.linalg.norm(v) for _ in range(8)],
        "matmul_256_x8": lambda: [small @ small for _ in range(8)],
        "exp_16M": lambda: cp.exp(w),
        "sum_16M": lambda: w.sum(),
        "argmax_16M": lambda: w.argmax(),
        "add_1M": lambda: m + m,
        "where_1M": lambda: cp.where(m > 0, m, 0),
        "cumsum_1M": lambda: cp.cumsum(m),
        "sort_1M": lambda: cp.sort(m),
        "fft_1M": lambda: cp.fft.fft(m),
        "copy_htod_4MB": lambda: cp.asarray(host),
        "copy_dtod_4MB": lambda: m.copy(),
        "memset_16MB": lambda: cp.zeros(4 * 2**20, dtype=cp.float32),
        "transpose_copy_4096": lambda: cp.ascontiguousarray(big.T),
    }
    for _ in gpu_profiler.iterations(30):
        for name, fn in ops.items():
            with gpu_profiler.op(name):
                fn()
'''

#: The same shape of test on the fake device: compute-bound and launch-bound kernels,
#: the host's time varying between processes.
MANY_OPS_FAKE = '''
import os
import random

SLOW = dict(p.split(":") for p in filter(None, os.environ.get("CUPTI_CHECK_SLOW", "").split(",")))


def factor(name):
    return float(SLOW.get(name, 1.0))


def test_many_ops(gpu_profiler):
    dev = gpu_profiler.timer.device_model
    host = random.Random()
    ops = {"matmul_4096": 2_664_000, "scale_4096_x40": 40 * 1_000, "norm_4096_x8": 24_700,
           "matmul_256_x8": 51_200, "exp_16M": 644_300, "sum_16M": 90_000,
           "add_1M": 12_000, "sort_1M": 150_000}
    for _ in gpu_profiler.iterations(12):
        for name, ns in ops.items():
            with gpu_profiler.op(name):
                dev.cpu(host.randrange(50_000, 250_000))
                if name == "add_1M":
                    dev.memcpy(8_000, "HtoD")
                dev.kernel(round(ns * factor(name)), name=name + "_kernel")
'''


class Check:
    def __init__(self, out: Path, dry_run: bool) -> None:
        self.out, self.dry_run = out, dry_run
        self.measure = "fake-kernel" if dry_run else "kernel"
        self.report: list[str] = []
        self.log: list[str] = []
        self.env = dict(os.environ, PYTHONUNBUFFERED="1")
        if dry_run:
            self.env["OPPROF_FAKE_CUPTI"] = "ok"
        self.env.pop(SLOW_ENV, None)

    def say(self, *lines: str) -> None:
        for line in lines:
            print(line, flush=True)
            self.report.append(line)

    def save(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "cupti_check.md").write_text("\n".join(self.report) + "\n", "utf-8")
        (self.out / "cupti_check.log").write_text("\n".join(self.log) + "\n", "utf-8")

    # -- set-up ------------------------------------------------------------------------
    def install(self) -> None:
        if self.dry_run:
            self.say("install: skipped (--dry-run: fake backend, fake CUPTI)")
            return
        if importlib.util.find_spec("cupti") is None:
            wheels = sorted(glob.glob(str(ROOT / ".whl" / "*.whl")))
            if not wheels:
                self.say("install: cupti-python is missing and .whl/ holds no wheels "
                         "(see this script's docstring)")
            else:
                cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                       "--no-compile", "--no-cache-dir", "--upgrade", "--target", SITE, *wheels]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                self.say(f"install: {len(wheels)} wheels into {SITE}: rc {proc.returncode}")
                self.log += [proc.stdout, proc.stderr]
            sys.path.insert(0, SITE)
        path = os.pathsep.join([SITE, str(ROOT), self.env.get("PYTHONPATH", "")])
        self.env["PYTHONPATH"] = path.rstrip(os.pathsep)

    def plugin_args(self) -> list[str]:
        try:
            importlib.metadata.distribution("pytest-opprof")
            return []
        except importlib.metadata.PackageNotFoundError:  # run from the tree, not installed
            return ["-p", "pytest_opprof.plugin"]

    def pytest(self, args: Iterable[str], cwd: Path, slow: str = "",
               batch: str = "") -> tuple[int, str]:
        """pytest in ``cwd``; ``batch``: the runs of one baseline update (kept together)."""
        env = dict(self.env)
        if slow:
            env[SLOW_ENV] = slow
        if batch:
            env[BATCH_VARIABLE] = batch
        cmd = [sys.executable, "-m", "pytest", *self.plugin_args(), "-p", "no:cacheprovider",
               "-p", "no:randomly", f"--opprof-measure={self.measure}", *args]
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
        self.log += [f"$ {SLOW_ENV}={slow} " + " ".join(cmd[2:]), proc.stdout, proc.stderr]
        return proc.returncode, proc.stdout + proc.stderr

    # -- the steps -----------------------------------------------------------------------
    def example_suite(self) -> None:
        rc, text = self.pytest([str(ROOT / "example_suite"), "--opprof-no-gate",
                                "--opprof-verbosity=1"], ROOT)
        header = [x for x in text.splitlines() if x.startswith("opprof: measure")]
        self.say("", "## Example suite with --opprof-measure=kernel", "",
                 f"- exit status {rc}; {header[0] if header else 'no measure line'}")

    def many_ops(self, baseline_runs: int, aa_runs: int) -> None:
        with tempfile.TemporaryDirectory(prefix="cupti-check-") as tmp:
            folder = Path(tmp)
            body = MANY_OPS_FAKE if self.dry_run else MANY_OPS_CUDA
            (folder / "test_many_ops.py").write_text(body, "utf-8")
            (folder / "pytest.ini").write_text("[pytest]\n", "utf-8")
            profiles = []
            for i in range(baseline_runs):
                out = folder / f"base{i}.json"
                rc, _ = self.pytest(["--opprof-update-baseline", f"--opprof-json={out}", "-q"],
                                    folder, batch="b")
                if rc == 0 and out.exists():
                    profiles += _passed_profiles(out)
            aa_failed = 0
            for i in range(aa_runs):
                out = folder / f"aa{i}.json"
                rc, _ = self.pytest([f"--opprof-json={out}", "-q"], folder)
                aa_failed += rc != 0
                if out.exists():
                    profiles += _passed_profiles(out)
            self.spread_table(profiles)
            self.say("", f"A/A: {aa_failed} false failure(s) in {aa_runs} runs against a "
                     f"{baseline_runs}-run baseline", "", "| injected into | change | caught "
                     "| gate line |", "|---|---|---|---|")
            # a dry run takes the first run's word; on a GPU, the gate confirms as it would
            confirm = ["--opprof-no-confirm"] if self.dry_run else []
            for name, change in INJECTIONS:
                rc, text = self.pytest(["-q", *confirm], folder, slow=f"{name}:{change}")
                lines = [x.strip() for x in text.splitlines() if f". {name}:" in x]
                caught = rc == 1 and bool(lines)
                self.say(f"| {name} | {change - 1:+.1%} | {'yes' if caught else 'no'} "
                         f"| {lines[0] if lines else '(none)'} |")

    def spread_table(self, profiles: list[dict[str, Any]]) -> None:
        """Per op: medians of kernel time and of the event span in each process, and
        their between-process spread (sd of the log medians)."""
        self.say("", f"## Many-op test: between-process spread ({len(profiles)} processes)", "",
                 "| op | kernel time median (us) | spread | activities per op "
                 "| event span median (us) | spread |", "|---|---|---|---|---|---|")
        if not profiles:
            self.say("| (no profile came back) | | | | | |")
            return
        ops = [o["name"] for o in profiles[0]["ops"]]
        for k, name in enumerate(ops):
            kernel = [_median(p["kernel_samples_ns"], p["skip"], k) for p in profiles]
            span = [_median(p["samples_ns"], p["skip"], k) for p in profiles]
            counts = _median(profiles[0]["kernel_counts"], profiles[0]["skip"], k)
            self.say(f"| {name} | {_range(kernel)} | {_spread(kernel)} | {counts:.0f} "
                     f"| {_range(span)} | {_spread(span)} |")

    def overhead(self) -> None:
        """Host cost per op of each way of timing it, in this process."""
        from pytest_opprof import Profiler, op
        from pytest_opprof.measure.timers.cuda import CudaTimer

        iterations, ops = (10, 100) if self.dry_run else (50, 200)
        if self.dry_run:
            from pytest_opprof.measure.timers.cupti import KernelTracer
            from pytest_opprof.measure.timers.fake import FakeDevice
            from pytest_opprof.measure.timers.fake_cupti import FakeCupti

            dev = FakeDevice()
            launch: Callable[[], Any] = lambda: dev.kernel(1000)  # noqa: E731
            sync: Callable[[], Any] = lambda: None  # noqa: E731

            def api() -> Any:
                return dev

            def tracer() -> Any:
                t = KernelTracer(FakeCupti())
                t.start()
                dev.cupti = t.api
                return t
        else:
            import cupy

            from pytest_opprof.measure.timers.cuda import CupyEvents
            from pytest_opprof.measure.timers.cupti import cuda_tracer

            x = cupy.ones(16, dtype=cupy.float32)
            launch = lambda: x.__imul__(1.0)  # noqa: E731
            sync = cupy.cuda.get_current_stream().synchronize
            api, tracer = CupyEvents, cuda_tracer

        def bare() -> None:
            for _ in range(iterations):
                for _ in range(ops):
                    launch()
                sync()

        def profiled(make: Callable[[], Any]) -> Callable[[], None]:
            def run() -> None:
                profiler = Profiler(make(), skip=0)
                scope = op("imul")
                for _ in profiler.iterations(iterations):
                    for _ in range(ops):
                        with scope:
                            launch()
                assert profiler.profile is not None
            return run

        def us_per_op(fn: Callable[[], None]) -> float:
            fn()
            times = []
            for _ in range(7):
                start = time.perf_counter_ns()
                fn()
                times.append(time.perf_counter_ns() - start)
            return statistics.median(times) / (iterations * ops) / 1e3

        rows = [("bare (one sync per iteration)", us_per_op(bare)),
                ("events: 2 per op (today's default)",
                 us_per_op(profiled(lambda: CudaTimer(api(), share_boundaries=False)))),
                ("events: 1 per boundary (shared)",
                 us_per_op(profiled(lambda: CudaTimer(api(), share_boundaries=True))))]
        kernel_tracer = tracer()  # CUPTI on from here: every launch is traced
        rows += [("bare, CUPTI tracing on", us_per_op(bare)),
                 ("kernel measure (CUPTI ids + 1 event per boundary)",
                  us_per_op(profiled(lambda: CudaTimer(api(), kernel_tracer))))]
        self.say("", f"## Host cost per op ({iterations} iterations of {ops} tiny kernels; "
                 "median of 7)", "", "| variant | us per op | over bare (us) |", "|---|---|---|")
        for label, us in rows:
            base = rows[3][1] if "CUPTI" in label or "kernel" in label else rows[0][1]
            self.say(f"| {label} | {us:.2f} | {us - base:+.2f} |")
        self.tracer = kernel_tracer

    def accuracy(self) -> None:
        """Kernel-time medians against cupyx.profiler.benchmark's GPU times."""
        if self.dry_run:
            self.say("", "## Accuracy: skipped (--dry-run: no GPU)")
            return
        import cupy
        import numpy as np
        from cupyx.profiler import benchmark

        from pytest_opprof import Profiler, op
        from pytest_opprof.measure.timers.cuda import CudaTimer, CupyEvents

        self.say("", "## Kernel time against cupyx.profiler.benchmark (n_repeat=200)", "",
                 "| kernel | size | cupyx median (us) | opprof kernel median (us) | difference |",
                 "|---|---|---|---|---|")
        rng = cupy.random.default_rng(0)
        cases: list[tuple[str, str, Callable[[], Any]]] = []
        for n in (512, 2048, 4096, 8192):
            a = rng.standard_normal((n, n), dtype=cupy.float32)
            cases.append(("matmul", f"{n}x{n}", lambda a=a: a @ a))
        for n in (10**6, 10**7, 10**8):
            v = rng.standard_normal(n, dtype=cupy.float32)
            cases.append(("x*2+1", f"{n:.0e}", lambda v=v: v * 2 + 1))
            cases.append(("sum", f"{n:.0e}", lambda v=v: v.sum()))
        for kind, size, fn in cases:
            reference = benchmark(fn, n_repeat=200, n_warmup=10)
            ref_us = float(np.median(reference.gpu_times[0])) * 1e6
            profiler = Profiler(CudaTimer(CupyEvents(), self.tracer), skip=2)
            scope = op(kind)
            for _ in profiler.iterations(22):
                for _ in range(30):
                    with scope:
                        fn()
            profile = profiler.profile
            assert profile is not None and profile.kernel_samples is not None
            ours_us = float(np.nanmedian(profile.kernel_samples[profile.skip:])) / 1e3
            self.say(f"| {kind} | {size} | {ref_us:.2f} | {ours_us:.2f} "
                     f"| {ours_us / ref_us - 1:+.2%} |")


def _median(rows: list[list[float | None]], skip: int, k: int) -> float:
    values = [r[k] for r in rows[skip:] if r[k] is not None]
    return float(statistics.median(values)) if values else math.nan


def _range(values: list[float]) -> str:
    ok = [v / 1e3 for v in values if math.isfinite(v)]
    if not ok:
        return "-"
    return f"{min(ok):.1f}" if max(ok) - min(ok) < 0.05 else f"{min(ok):.1f}-{max(ok):.1f}"


def _spread(values: list[float]) -> str:
    logs = [math.log(v) for v in values if math.isfinite(v) and v > 0]
    return f"{statistics.stdev(logs):.2%}" if len(logs) > 1 else "-"


def _passed_profiles(path: Path) -> list[dict[str, Any]]:
    """The profiles of the tests that passed, from a results file (``--opprof-json``)."""
    from pytest_opprof.store.results import load_records

    return [record.profile.to_dict() for record in load_records(path)[1] if record.passed]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or "cupti_check_out")
    parser.add_argument("--dry-run", action="store_true",
                        help="fake backend and fake CUPTI, fewer runs: no GPU needed")
    args = parser.parse_args(argv)
    check = Check(Path(args.out), args.dry_run)
    check.say("# cupti_check" + (" (dry run: fake backend, fake CUPTI)" if args.dry_run else ""))
    try:
        check.install()
        if not args.dry_run:
            import cupy

            props = cupy.cuda.runtime.getDeviceProperties(0)
            name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
            check.say(f"cupy {cupy.__version__}, CUDA runtime "
                      f"{cupy.cuda.runtime.runtimeGetVersion()}, device 0: {name}")
        check.example_suite()
        check.many_ops(*((2, 1) if args.dry_run else (4, 5)))
        check.overhead()
        check.accuracy()
    finally:
        check.save()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
