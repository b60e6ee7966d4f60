"""Callgrind's dumps read back: each mark's interval count, and where it was spent.

Each mark (``_callgrind.mark``) dumps the counts of the interval since the previous dump
to a file of its own, ``PREFIX.<part>``, labelled ``opprof <k>``; a dump resets the
counts, so the ``summary:`` line of mark k's file is the instructions executed between
mark k - 1 and mark k. An op's split by function is the sum of its marks' self costs
(``fn=`` blocks; the cost line after a ``calls=`` line is the callee's inclusive cost,
which a self cost leaves out).

The standard library only: the timer runs it as a script in a native process (valgrind
does not follow it), because Python parsing megabytes runs 50 times slower under
valgrind::

    python -I callgrind.py PREFIX FIRST LAST FUNCTIONS_FROM

prints ``{"summary": {k: Ir}, "functions": {k: [[name, Ir]...]}}`` for marks FIRST..LAST
(functions from FUNCTIONS_FROM on), and removes the files it read.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

#: The label a mark's dump carries (``desc: Trigger: Client Request: opprof 17``).
LABEL = re.compile(r"^desc: Trigger: Client Request: opprof (\d+)\s*$")
#: Functions kept per interval (by self instructions): what naming the growth needs.
TOP_FUNCTIONS = 40


class DumpError(Exception):
    """A dump that cannot be read: the message names the file."""


def _name(line: str, names: dict[str, str]) -> str:
    """A ``fn=`` value: ``(12) name`` defines id 12, ``(12)`` refers to it."""
    value = line.split("=", 1)[1].strip()
    if value.startswith("("):
        ident, _, rest = value.partition(")")
        rest = rest.strip()
        if rest:
            names[ident] = rest
            return rest
        return names.get(ident, value)
    return value


def read_dump(path: str, functions_from: int | None = None
              ) -> tuple[int | None, int, dict[str, int]]:
    """One dump file: its mark's label (None: not one of ours), its instruction count,
    and each function's self count when its label is ``functions_from`` or later."""
    label: int | None = None
    summary: int | None = None
    costs: dict[str, int] = {}
    names: dict[str, str] = {}
    current = ""
    skip_next = False
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if summary is None:
                    match = LABEL.match(line)
                    if match:
                        label = int(match.group(1))
                    elif line.startswith("summary:"):
                        summary = int(line.split(":", 1)[1].split()[0])
                        if functions_from is None or label is None or label < functions_from:
                            break
                    continue
                head = line[:1]
                if head.isdigit() or head in "+-*":
                    if skip_next:
                        skip_next = False
                        continue
                    parts = line.split()
                    if len(parts) >= 2:
                        costs[current] = costs.get(current, 0) + int(parts[1])
                elif line.startswith("fn="):
                    current = _name(line, names)
                elif line.startswith("calls="):
                    skip_next = True
                elif line.startswith("cfn="):
                    _name(line, names)  # defines a name used by a later fn= line
    except OSError as exc:
        raise DumpError(f"{path}: cannot read callgrind's dump ({exc.strerror})") from None
    except (ValueError, IndexError):
        raise DumpError(f"{path}: not a callgrind dump this version can read") from None
    if summary is None:
        raise DumpError(f"{path}: callgrind's dump has no summary line (cut short?)")
    return label, summary, costs


def _parts(prefix: str) -> Iterator[tuple[int, str]]:
    folder, base = os.path.split(prefix)
    for entry in os.listdir(folder or "."):
        head, _, part = entry.rpartition(".")
        if head == base and part.isdigit():
            yield int(part), os.path.join(folder, entry)


def read_marks(prefix: str, first: int, last: int, functions_from: int) -> dict[str, Any]:
    """Marks ``first``..``last``: each one's interval count (``summary``) and, from
    ``functions_from`` on, its costliest functions; the files read are removed."""
    summary: dict[str, int] = {}
    split: dict[str, list[list[object]]] = {}
    for _, path in sorted(_parts(prefix)):
        label, count, costs = read_dump(path, functions_from)
        if label is None or not first <= label <= last:
            continue
        summary[str(label)] = count
        if label >= functions_from:
            top = sorted(costs.items(), key=lambda kv: -kv[1])[:TOP_FUNCTIONS]
            split[str(label)] = [[name, cost] for name, cost in top if cost > 0]
        os.remove(path)
    return {"summary": summary, "functions": split}


def main(argv: list[str]) -> int:
    if len(argv) != 5:
        print("usage: callgrind.py PREFIX FIRST LAST FUNCTIONS_FROM", file=sys.stderr)
        return 2
    try:
        found = read_marks(argv[1], int(argv[2]), int(argv[3]), int(argv[4]))
    except (DumpError, OSError) as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    json.dump(found, sys.stdout, separators=(",", ":"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
