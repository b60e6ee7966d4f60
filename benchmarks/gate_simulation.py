"""How often does the gate fail on noise, and how often does it catch a slowdown?

    python benchmarks/gate_simulation.py                 # the table in RESULTS.md (a few minutes)
    python benchmarks/gate_simulation.py --quick         # fewer trials
    python benchmarks/gate_simulation.py --noise noise.json   # each op's spread as measured

The rule is the plugin's own: ``rule.compare_with_rerun`` with the settings the plugin
gives a CPU test (``gate.gate_config``), the re-run a new simulated process; the
peers' rules are benchmarks/peer_rules.py, as benchmarks/gate_runs.py applies them to
real runs.

Generates per-op samples of a test under a noise model fitted to real runs on
these machines (../shared/GATE.md), runs the baseline K times and the candidate
once, each "run" a separate process with its own offsets, and measures for each
rule: the share of A/A tests that fail (false failures), and the share of tests
in which one op, slowed by 5/10/20/50%, is flagged.

The noise model, per run unless said otherwise:
- machine drift: lognormal sigma 3%, shared by every op;
- drift per op class (compute/memory/launch bound): 1%;
- a per-op offset (allocation, layout, cache placement), normal in log with the
  op's own spread tau: lognormal across ops with median 2.2% and log-sd 0.55
  (10% of ops above 4.4%, 1% above 8%), combined with 0.3 us of absolute jitter
  (so a 5 us op has at least 6%). Fitted to 6 runs of the example suite in
  separate processes on this machine: drift-corrected spread median 2.5-3.4%
  for ops over 5 us, p90 4-9%, max 11%; 4.9% median for ops under 5 us;
- iteration jitter shared by all ops of an iteration: 2%;
- per-sample noise: lognormal 5% times a right-skewed exponential tail of mean 2%;
- runs taken later than the baseline (the checks, not the back-to-back baseline runs)
  carry what the baseline cannot see: a second per-op offset of the op's own tau, and
  in 20% of them a contention episode that slows one op class by lognormal 10%. Real
  A/A runs here scored a standard deviation of 2.1 on the z of the back-to-back model;
  this term reproduces that;
- bursts: in 30% of runs, 3-6 consecutive iterations 1.2-1.5x slower;
- spikes: 2% of samples 1.5-4x;
- timer resolution: 50 ns.
The "harsh" variant doubles the machine, class and offset terms.

``--noise FILE`` (written by ``python benchmarks/gate_runs.py fit --dir D --out FILE``
from real A/A runs) replaces the per-op offset: each simulated op takes the spread of a
measured op of about its size (the nearest in log time of the file's ops), and the
machine drift takes the runs' measured log-sd; every other term stays as above.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import NormalDist

import numpy as np

if __package__ in (None, ""):  # run as a script: the repository's packages come first
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.peer_rules import asv_flags, pytest_benchmark_fails
from pytest_opprof.judge.config import TOLERANCE
from pytest_opprof.judge.gate import gate_config
from pytest_opprof.judge.rule import GateConfig, compare_with_rerun
from pytest_opprof.measure.measures import named
from pytest_opprof.model.verdict import OpStatus


@dataclass(frozen=True)
class NoiseModel:
    machine: float = 0.03
    op_class: float = 0.01
    offset_median: float = 0.022
    offset_spread: float = 0.55
    offset_abs_ns: float = 300.0
    iteration: float = 0.02
    sample: float = 0.05
    tail: float = 0.02
    later_offset: float = 1.0
    episode_chance: float = 0.2
    episode_shift: float = 0.10
    burst_chance: float = 0.3
    spike_chance: float = 0.02
    resolution_ns: float = 50.0
    #: Measured ops (``--noise``): their medians (ns) and spreads between processes;
    #: empty: the lognormal offset above.
    measured_ns: np.ndarray = field(default_factory=lambda: np.zeros(0))
    measured_tau: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def harsh(self) -> NoiseModel:
        return replace(self, machine=0.06, op_class=0.02, offset_median=0.044)

    @classmethod
    def fitted(cls, noise: dict, nodeid: str | None = None) -> NoiseModel:
        """The model with each op's spread and the machine drift from real A/A runs
        (gate_runs.py's ``fitted_noise``; only ``nodeid``'s ops when given)."""
        ops = [o for o in noise["ops"] if o["median_ns"] > 0
               and (nodeid is None or o["nodeid"] == nodeid)]
        if not ops:
            raise ValueError("no ops with a spread (gate_runs.py fit --out writes them)")
        machine = noise["machine"]
        return cls(machine=machine if machine and math.isfinite(machine) else cls.machine,
                   measured_ns=np.array([o["median_ns"] for o in ops]),
                   measured_tau=np.array([o["tau"] for o in ops]))


@dataclass(frozen=True)
class SimTest:
    true_ns: np.ndarray
    classes: np.ndarray
    #: Each op's process-to-process spread (sigma of its log offset).
    tau: np.ndarray


def make_test(rng: np.random.Generator, ops: int, model: NoiseModel) -> SimTest:
    """True per-op times, log-uniform 5 us to 5 ms, each op's class and spread."""
    if model.measured_ns.size == ops:  # the measured test itself
        return SimTest(model.measured_ns, rng.integers(0, 3, ops), model.measured_tau)
    true_ns = np.exp(rng.uniform(math.log(5e3), math.log(5e6), ops))
    if model.measured_ns.size:
        nearest = np.abs(np.log(true_ns)[:, None] - np.log(model.measured_ns)[None, :])
        tau = model.measured_tau[nearest.argmin(axis=1)]
    else:
        relative = model.offset_median * np.exp(rng.normal(0, model.offset_spread, ops))
        tau = np.sqrt(relative ** 2 + (model.offset_abs_ns / true_ns) ** 2)
    return SimTest(true_ns, rng.integers(0, 3, ops), tau)


def run(rng, model: NoiseModel, test: SimTest, iterations, slow=None, factor=1.0,
        later=True):
    """One process's counted samples, (iterations, ops), and its probe reading."""
    true_ns, classes = test.true_ns, test.classes
    ops = len(true_ns)
    machine = math.exp(rng.normal(0, model.machine))
    level = true_ns * machine * np.exp(rng.normal(0, model.op_class, 3))[classes]
    level = level * np.exp(rng.normal(0, test.tau))
    if later:
        level = level * np.exp(rng.normal(0, model.later_offset * test.tau))
        if rng.random() < model.episode_chance:
            level[classes == rng.integers(3)] *= math.exp(abs(rng.normal(0, model.episode_shift)))
    if slow is not None:
        level[slow] *= factor
    it = np.exp(rng.normal(0, model.iteration, iterations))[:, None]
    noise = np.exp(rng.normal(0, model.sample, (iterations, ops)))
    noise *= 1 + rng.exponential(model.tail, (iterations, ops))
    spikes = rng.random((iterations, ops)) < model.spike_chance
    noise[spikes] *= rng.uniform(1.5, 4, spikes.sum())
    if rng.random() < model.burst_chance:
        start, length = rng.integers(0, iterations), rng.integers(3, 7)
        it[start:start + length] *= rng.uniform(1.2, 1.5)
    samples = level * it * noise
    samples = np.maximum(np.round(samples / model.resolution_ns), 1) * model.resolution_ns
    probe = machine * math.exp(rng.normal(0, 0.02))  # a reference probe has its own offset
    return samples, probe


def as_mapping(samples: np.ndarray) -> dict:
    return {(f"op{k}", 0): samples[:, k] for k in range(samples.shape[1])}


# -- the rules ----------------------------------------------------------------------------
# Each takes (test, baseline runs, current run, rerun) and returns the flagged op indices
# (-1: the whole test). ``rerun()`` measures the candidate again in a "new process".


def _opprof(test, base_runs, cur, rerun, config, confirm):
    keys = [(f"op{k}", 0) for k in range(cur[0].shape[1])]
    current = {key: cur[0][:, k] for k, key in enumerate(keys)}
    baseline = {key: [b[0][:, k] for b in base_runs] for k, key in enumerate(keys)}
    ids = {key: k for k, key in enumerate(keys)}
    probe = cur[1] / float(np.mean([b[1] for b in base_runs]))

    def again(suspects):
        samples = rerun()[0]
        return {key: samples[:, k] for k, key in enumerate(keys)}

    result = compare_with_rerun(current, baseline, ids, config, again if confirm else None,
                                probe_drift=probe)
    return {int(v.name[2:]) for v in result.having(OpStatus.REGRESSED)}


def cpu_config() -> GateConfig:
    """The rule's settings as the plugin makes them for a CPU test by default."""
    return gate_config(named("time").gate, TOLERANCE, {})


def rule_opprof(config: GateConfig | None = None, confirm: bool = True):
    return lambda *args: _opprof(*args, config=config or cpu_config(), confirm=confirm)


def rule_pytest_benchmark(test, base_runs, cur, rerun):
    """--benchmark-compare-fail=mean:5% on the whole test against the latest baseline run."""
    return {-1} if pytest_benchmark_fails(cur[0].sum(axis=1), base_runs[-1][0].sum(axis=1)) \
        else set()


def rule_asv(test, base_runs, cur, rerun):
    """asv per op: Mann-Whitney U p < 0.002 and a ratio of medians > 1.1, against the
    baseline runs' samples pooled (asv pools its processes)."""
    current = dict(enumerate(cur[0].T))
    baseline = dict(enumerate(np.concatenate([b[0] for b in base_runs]).T))
    return asv_flags(current, baseline)


def rule_oracle(test, base_runs, cur, rerun, alpha=0.001):
    """A bound, not a rule: each op's true spread between processes is known. Drift-
    corrected log ratio of medians against a Bonferroni z at per-test alpha."""
    c = np.log(np.median(cur[0], axis=0))
    b = np.mean([np.log(np.median(r[0], axis=0)) for r in base_runs], axis=0)
    d = c - b
    d -= np.median(d)
    k = len(base_runs)
    within = (np.pi / 2) * (0.06 ** 2) / cur[0].shape[0]  # the model's per-sample noise
    sd = np.sqrt(test.tau ** 2 * (1 + 1 / k) + within * (1 + 1 / k)
                  + (test.tau * NoiseModel().later_offset) ** 2)
    z = NormalDist().inv_cdf(1 - alpha / len(d))
    return set(np.flatnonzero(d > z * sd).tolist())


def trial_rates(rule, model, ops, iterations, k_runs, slowdowns, trials, seed, history=False,
                min_slow_ns=0.0, exact=False):
    """{slowdown: share of trials flagged}; slowdown 1.0 is the A/A false-failure rate.
    The slowed op is one of at least ``min_slow_ns``; ``exact``: a detection counts only
    when nothing else was flagged."""
    rng = np.random.default_rng(seed)
    rates = {}
    for factor in slowdowns:
        hits = 0
        n = trials["aa"] if factor == 1.0 else trials["ab"]
        for _ in range(n):
            test = make_test(rng, ops, model)
            base = [run(rng, model, test, iterations, later=history) for _ in range(k_runs)]
            eligible = np.flatnonzero(test.true_ns >= min_slow_ns)
            slow = None if factor == 1.0 else int(rng.choice(eligible))
            cur = run(rng, model, test, iterations, slow, factor)
            flagged = rule(test, base, cur,
                           lambda test=test, slow=slow, factor=factor:
                           run(rng, model, test, iterations, slow, factor))
            if factor == 1.0:
                hits += bool(flagged)
            else:
                caught = slow in flagged or -1 in flagged
                hits += caught and (not exact or len(flagged) == 1)
        rates[factor] = hits / n
    return rates


def fmt(rate: float, n: int) -> str:
    if rate == 0:
        return f"0 / {n}"
    return f"{rate:.4f}" if rate < 0.01 else f"{rate:.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer trials")
    parser.add_argument("--aa", type=int, default=2000, help="A/A trials per row")
    parser.add_argument("--ab", type=int, default=300, help="trials per slowdown")
    parser.add_argument("--only", default="", help="only rows whose label contains this")
    parser.add_argument("--noise", type=Path, default=None,
                        help="each op's spread as measured: gate_runs.py fit --out FILE")
    parser.add_argument("--real", type=Path, nargs="+", default=[], metavar="DIR",
                        help="instead of the table: each test of these gate_runs.py folders, "
                             "its real figures beside the simulated ones under its own "
                             "measured noise")
    args = parser.parse_args()
    trials = {"aa": 300, "ab": 100} if args.quick else {"aa": args.aa, "ab": args.ab}
    if args.real:
        return real_vs_simulated(args.real, trials)
    slowdowns = [1.0, 1.05, 1.10, 1.20, 1.50]
    try:
        model = NoiseModel.fitted(json.loads(args.noise.read_text())) if args.noise \
            else NoiseModel()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.error(f"--noise {args.noise}: cannot be read as gate_runs.py fit's output "
                     f"({exc})")
    quiet = NoiseModel(offset_median=0.015, offset_spread=0.0, offset_abs_ns=0.0,
                       later_offset=0.0, episode_chance=0.0)
    single = rule_opprof(confirm=False)
    # baselines spanning an hour or more are inflated less (pytest_opprof/judge/gate.py)
    history_rule = rule_opprof(replace(cpu_config(),
                                       spread_inflation=GateConfig().history_inflation))
    rows = [
        ("pytest-benchmark mean:5%, whole test", rule_pytest_benchmark, model, 100, 19, 1),
        ("asv per op (MWU p<0.002 and >10%)", rule_asv, model, 100, 19, 1),
        ("opprof, 1 baseline run, no re-run", single, model, 100, 19, 1),
        ("opprof, 5 baseline runs, no re-run", single, model, 100, 19, 5),
        ("**opprof default: 5 baseline runs + re-run**", rule_opprof(), model, 100, 19, 5),
        ("opprof default, 50 ops", rule_opprof(), model, 50, 19, 5),
        ("opprof default, 300 ops", rule_opprof(), model, 300, 19, 5),
        ("opprof default, 3 ops (drift from the probe)", rule_opprof(), model, 3, 19, 5),
        ("opprof default, 3 baseline runs", rule_opprof(), model, 100, 19, 3),
        ("opprof default, 49 counted iterations", rule_opprof(), model, 100, 49, 5),
        ("bound: each op's spread known, 5 runs, no re-run", rule_oracle, model, 100, 19, 5),
        ("harsh noise: pytest-benchmark", rule_pytest_benchmark, model.harsh(), 100, 19, 1),
        ("harsh noise: asv", rule_asv, model.harsh(), 100, 19, 1),
        ("harsh noise: opprof default", rule_opprof(), model.harsh(), 100, 19, 5),
        ("GATE.md's quiet model (1.5% for every op): opprof default", rule_opprof(), quiet,
         100, 19, 5),
        ("history: 10 baseline runs over hours (`--opprof-update-baseline=append`)", history_rule,
         model, 100, 19, 10),
        ("history, GATE.md's quiet model", history_rule, quiet, 100, 19, 10),
    ]
    print("| rule | ops | counted iterations | baseline runs | A/A false failures per test "
          "| +5% | +10% | +20% | +50% |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, (label, rule, noise, ops, iters, k) in enumerate(rows):
        if args.only and args.only not in label:
            continue
        t0 = time.perf_counter()
        rates = trial_rates(rule, noise, ops, iters, k, slowdowns, trials, seed=1000 + i,
                            history=label.startswith("history"))
        cells = [fmt(rates[1.0], trials["aa"])] + [f"{rates[f]:.2f}" for f in slowdowns[1:]]
        print(f"| {label} | {ops} | {iters} | {k} | " + " | ".join(cells) + " |", flush=True)
        print(f"  ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 0


def real_vs_simulated(folders: list[Path], trials: dict[str, int]) -> int:
    """Each test of each folder: the real A/A false failures and exact detections of
    every rule, beside the simulation's for a test of the same ops (their measured
    spreads), counted iterations and baseline runs, injections into ops of 20 us or more."""
    from benchmarks.gate_runs import MIN_INJECT_NS, Refused, Store, fitted_noise, real_rates

    rules = {"opprof": rule_opprof(), "pytest-benchmark": rule_pytest_benchmark,
             "asv": rule_asv}
    for folder in folders:
        try:
            store = Store(folder)
            noise, rates = fitted_noise(store), real_rates(store)
        except Refused as exc:
            print(f"gate_simulation.py: {exc}", file=sys.stderr)
            return 2
        for nodeid, real in rates.items():
            factors = sorted({f for counts in real.values() if isinstance(counts, dict)
                              for f in counts})
            model = NoiseModel.fitted(noise, nodeid)
            print(f"\n{folder}: {nodeid}: {real['ops']} ops, {real['counted']} counted "
                  f"iterations, {real['runs']} baseline run(s); real (hits / runs) vs "
                  "simulated (share of trials); detection: exactly that op\n")
            labels = ["A/A false failures" if f == 1.0 else f"x{f:g} caught" for f in factors]
            print("| rule | " + " | ".join(f"{label}: real | {label}: simulated"
                                           for label in labels) + " |")
            print("|---|" + "---|---|" * len(factors))
            for i, (name, rule) in enumerate(rules.items()):
                sim = trial_rates(rule, model, len(model.measured_ns), real["counted"],
                                  real["runs"], factors, trials, seed=2000 + i,
                                  min_slow_ns=MIN_INJECT_NS, exact=True)
                cells = []
                for f in factors:
                    hits, n = real[name].get(f, (0, 0))
                    cells += [f"{hits} / {n}" if n else "-", f"{sim[f]:.3f}"]
                print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
