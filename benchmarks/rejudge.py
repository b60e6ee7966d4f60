"""Judge a gate_runs.py folder's runs again with the code as it is now (first process only).

    python benchmarks/rejudge.py /tmp/G2/mo5 [spread_inflation=1.0 ...]

Every run's results file holds its profiles and names the baseline file it was judged
against; this applies today's ``gate.judge`` (no confirmation re-run), with optional
``GateConfig`` overrides, and prints the A/A runs that would fail and the injections
caught exactly (runs named ``inject-n<N>-<op>-<factor>-<r>``).
"""

from __future__ import annotations

import glob
import json
import re
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pytest_opprof.judge.gate import gate_config, judge  # noqa: E402
from pytest_opprof.measure.measures import named  # noqa: E402
from pytest_opprof.model.hints import Retake  # noqa: E402
from pytest_opprof.model.verdict import Verdict  # noqa: E402
from pytest_opprof.store.baseline import load_file  # noqa: E402
from pytest_opprof.store.results import load_records  # noqa: E402


def failed_ops(path: Path, config) -> tuple[set[str], bool]:
    """The ops today's gate fails in one run's results file, and whether any test of it
    is left unjudged."""
    _, tests = load_records(path)
    files = {t["nodeid"]: t.get("baseline_file") for t in json.loads(path.read_text())["tests"]}
    failed, unjudged = set(), False
    for reported in tests:
        profile = reported.profile
        if not files.get(profile.nodeid):
            continue
        result = judge(profile, load_file(Path(files[profile.nodeid])), machine="m",
                       retake=Retake(),
                       config=config, budgets={}, strict_ops=False)
        unjudged |= result.verdict == Verdict.UNJUDGED
        if result.comparison is not None:
            failed |= {v.name for v in result.comparison.having("regressed")}
    return failed, unjudged


def main(folder: str, overrides: list[str]) -> int:
    settings = {key: float(value) for key, value in (o.split("=") for o in overrides)}
    config = replace(gate_config(named("time").gate, 0.05, {}), **settings)
    aa = aa_failed = unjudged = 0
    caught: dict[str, list[bool]] = {}
    for name in sorted(glob.glob(f"{folder}/runs/*.json")):
        path = Path(name)
        failed, refused = failed_ops(path, config)
        unjudged += refused
        if path.stem.startswith("aa-"):
            aa += 1
            aa_failed += bool(failed)
        elif match := re.match(r"inject-n\d+-(.+)-([\d.]+)-\d+$", path.stem):
            op, factor = match.groups()
            caught.setdefault(factor, []).append(failed == {op})
    detection = ", ".join(f"x{f}: {sum(v)} / {len(v)} caught exactly" for f, v in caught.items())
    print(f"{folder} {settings or ''}: A/A {aa_failed} / {aa} failed; {unjudged} run(s) with a "
          f"test unjudged; {detection or 'no injections'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
