"""Every judge's figures on recorded processes, at full precision: a refactor's guard.

    python benchmarks/judges_dump.py dump /tmp/procs [--even] > after.json
    python benchmarks/judges_dump.py diff before.json after.json

``dump`` reads the processes ``benchmarks/compare_replay.py --record N FOLDER`` recorded
(results files ``p0.json`` ...) and writes, as JSON, what each judge makes of them:
``opprof compare`` with 1 pair (the files form) and 4 pairs, the stored-baseline gate
(each 3rd process against the 5 before it) and its per-op noise, the baseline runs'
agreement (windows of 5), and the history's drift and noise. ``--even`` drops each
process's last iteration first, so that medians are taken over an even count. Run it in
two trees (the same recording) and ``diff`` the files: each judge's number of
differences, the largest relative one, and any verdict that changed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pytest_opprof.judge import agreement, changepoints, comparison, rule  # noqa: E402
from pytest_opprof.model.profile import Profile  # noqa: E402
from pytest_opprof.store.results import load_records  # noqa: E402


def _samples(p: Profile) -> dict[tuple[str, int], np.ndarray]:
    cols = p.counted_samples()
    return {(o.name, o.occurrence): cols[o.op_id] for o in p.ops}


def _num(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)


def profiles(folder: Path, even: bool) -> list[Profile]:
    files = sorted(folder.glob("p*.json"), key=lambda f: int(f.stem[1:]))
    found = [load_records(f)[1][0].profile for f in files]
    if even:
        found = [replace(p, samples=p.samples[:-1], wall=p.wall[:-1], op_time=p.op_time[:-1])
                 for p in found]
    return found


def dump(found: list[Profile]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for npairs in (1, 4):
        rows = []
        for start in range(0, len(found) - 2 * npairs + 1, 2 * npairs):
            base = [{"t": found[start + 2 * k]} for k in range(npairs)]
            head = [{"t": found[start + 2 * k + 1]} for k in range(npairs)]
            test = comparison.compare_runs(base, head, mode="files", labels=("a", "b")).tests[0]
            rows.append([[r.name, r.occurrence, _num(r.change.change), _num(r.change.low),
                          _num(r.change.high), _num(r.change.sd), _num(r.change.detectable),
                          str(r.change.verdict)] for r in test.ops])
        out[f"compare_{npairs}"] = rows
    ids = {(o.name, o.occurrence): o.op_id for o in found[0].ops}
    gate = []
    for k in range(5, len(found), 3):
        base: dict[tuple[str, int], list[np.ndarray]] = {}
        for p in found[k - 5:k]:
            for key, v in _samples(p).items():
                base.setdefault(key, []).append(v)
        c = rule.compare(_samples(found[k]), base, ids, rule.GateConfig(floor_ns=500.0))
        gate.append([_num(c.drift)] + [[v.name, v.occurrence, str(v.verdict), _num(v.z),
                                        _num(v.margin), _num(v.detectable), _num(v.spread)]
                                       for v in c.ops])
        if k == 5:
            out["noise"] = [[key[0], key[1], _num(n.spread), _num(n.detectable), n.runs]
                            for key, n in sorted(rule.noise(base).items())]
    out["gate"] = gate
    agreed = []
    for k in range(0, len(found) - 4, 5):
        a = agreement.check([_samples(p) for p in found[k:k + 5]])
        agreed.append([{str(j): [list(o) for o in ops] for j, ops in a.outliers.items()},
                       sorted([[key[0], key[1], _num(v)] for key, v in a.spread.items()])])
    out["agreement"] = agreed
    series: dict[tuple[str, int], tuple[list[int], list[float]]] = {}
    for i, p in enumerate(found):
        for key, v in _samples(p).items():
            where, values = series.setdefault(key, ([], []))
            where.append(i)
            values.append(float(np.median(v)))
    drift = changepoints.run_drift(series, len(found))
    out["history_drift"] = [] if drift is None else [float(x) for x in drift]
    out["history_noise"] = [changepoints.noise(changepoints.log_times(v))
                            for _, v in series.values()]
    return out


def _walk(x: Any, y: Any, path: str, acc: list[tuple[Any, ...]]) -> None:
    if isinstance(x, list) and isinstance(y, list):
        if len(x) != len(y):
            acc.append((path, "length", len(x), len(y)))
            return
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            _walk(u, v, f"{path}[{i}]", acc)
    elif isinstance(x, dict) and isinstance(y, dict):
        for k in sorted(set(x) | set(y)):
            _walk(x.get(k), y.get(k), f"{path}.{k}", acc)
    elif isinstance(x, float) and isinstance(y, float):
        if x != y:
            acc.append((path, "number", x, y, abs(x - y) / max(abs(x), abs(y), 1e-300)))
    elif x != y:
        acc.append((path, "value", x, y))


def diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    lines = []
    for key in a:
        acc: list[tuple[Any, ...]] = []
        _walk(a[key], b.get(key), key, acc)
        numbers = [d for d in acc if d[1] == "number"]
        other = [d for d in acc if d[1] != "number"]
        largest = max((d[4] for d in numbers), default=0.0)
        lines.append(f"{key}: {len(acc)} differences; {len(numbers)} numbers (largest "
                     f"relative {largest:.3g}); {len(other)} other (verdicts, lengths)")
        lines += [f"    {d}" for d in other[:10]]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    d = commands.add_parser("dump", help="the judges' figures of a recording, as JSON")
    d.add_argument("folder", type=Path)
    d.add_argument("--even", action="store_true", help="medians over an even count")
    f = commands.add_parser("diff", help="two dumps compared")
    f.add_argument("before", type=Path)
    f.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.command == "dump":
        json.dump(dump(profiles(args.folder, args.even)), sys.stdout, indent=0)
    else:
        print("\n".join(diff(json.loads(args.before.read_text()),
                             json.loads(args.after.read_text()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
