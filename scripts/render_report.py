"""Render an opprof HTML report in headless Chromium and check that it shows its charts.

    python scripts/render_report.py REPORT.html [SCREENSHOT.png]

Needs Debian's chromium (apt-get install chromium) and matplotlib; not part of the test
run (the tests check the HTML itself). Chromium loads the file with the network off;
the script then checks, in the DOM Chromium built, that every chart is an SVG with
drawn paths, and, in the screenshot, that the page is not blank (many colours, and the
charts' blue, red or grey bars among them). Exits 0 when all holds.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]


def chromium(args: list[str]) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        sys.exit("render_report: chromium is not installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=120)


def main(argv: list[str]) -> int:
    if not argv:
        sys.exit(__doc__)
    report = Path(argv[0]).resolve()
    shot = Path(argv[1] if len(argv) > 1 else report.with_suffix(".png")).resolve()
    dom = chromium(["--dump-dom", report.as_uri()]).stdout
    charts = re.findall(r'<div class="chart">(.*?)</div>', dom, re.S)
    drawn = [c for c in charts if "<svg" in c and c.count("<path") >= 5]
    sections = dom.count('<section class="test">')
    chromium([f"--screenshot={shot}", "--window-size=1200,2400", report.as_uri()])
    import matplotlib.image
    import numpy as np

    pixels = matplotlib.image.imread(shot)[..., :3]
    colours = len(np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0))
    ok = sections > 0 and len(drawn) == len(charts) > 0 and colours > 50
    print(f"render_report: {sections} test section(s), {len(charts)} chart(s), "
          f"{len(drawn)} drawn as SVG with paths; screenshot {shot} with {colours} colours: "
          f"{'OK' if ok else 'NOT OK'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
