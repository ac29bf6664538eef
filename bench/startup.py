"""Startup cost: ``%load_ext ipyagent`` in a fresh IPython process, and the time from running a
``%%agent`` cell to the model's first request (scripted model, so no network).

    python bench/startup.py [--runs 7]

Target: load_ext adds < 150 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

from _report import report

PROBE = r"""
import json, time
from IPython.testing.globalipapp import start_ipython
ip = start_ipython()
t0 = time.perf_counter()
ip.run_line_magic("load_ext", "ipyagent")
load = time.perf_counter() - t0
ip.run_cell('''
import time
from ipyagent.testing import ScriptedModel
class Timed(ScriptedModel):
    first = None
    async def stream(self, request):
        Timed.first = Timed.first or time.perf_counter()
        async for event in super().stream(request):
            yield event
m = Timed(["ok"])
''')
t1 = time.perf_counter()
ip.run_cell("%%agent -m m --quiet\nhello")
first = ip.user_ns["Timed"].first - t1

ip.run_cell("m.add('again')")
t3 = time.perf_counter()
ip.run_cell("%%agent -m m --quiet\nhello again")
print(json.dumps({"load_ext_ms": load * 1e3, "first_request_ms": first * 1e3,
                  "warm_cell_ms": (time.perf_counter() - t3) * 1e3}))
"""


def main(runs: int) -> None:
    samples = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as work:  # the run's conversation file lands there
            out = subprocess.run(
                [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, cwd=work
            ).stdout
        samples.append(json.loads(out.strip().splitlines()[-1]))
    rows = []
    for key in ("load_ext_ms", "first_request_ms", "warm_cell_ms"):
        values = [s[key] for s in samples]
        rows.append([key, statistics.median(values), min(values), max(values)])
    report(
        "startup",
        ["measure", "median ms", "min ms", "max ms"],
        rows,
        {"runs": runs, "target_load_ext_ms": 150},
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7)
    main(parser.parse_args().runs)
