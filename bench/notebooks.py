"""The repository's notebooks as a test suite: serial, under pytest-xdist, and with
``python -m ipyagent run --jobs``. Every run replays the committed cassettes (offline).

    python bench/notebooks.py [--repeat 2] [--workers 2]

Rows:
- ``pytest --nbval`` — the command nbval users type, one notebook after another;
- ``pytest -n W --nbval`` — W pytest-xdist workers, each notebook's cells on one worker;
- ``ipyagent run --replay --jobs 1`` and ``--jobs W`` — the headless runner, W kernels at once.

Wall time is the median of ``--repeat`` runs of the whole command, start-up included. On a
machine with C cores, W workers can at best divide the time by min(W, C, notebooks); the "cpu
load" extra says whether anything else took CPU time meanwhile.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _report import report

ROOT = Path(__file__).resolve().parent.parent


def commands(workers: int) -> dict[str, list[str]]:
    py = sys.executable
    pytest = [py, "-m", "pytest", "--nbval", "notebooks", "-q", "-p", "no:cacheprovider"]
    run = [py, "-m", "ipyagent", "run", "notebooks", "--replay", "--jobs"]
    return {
        "pytest --nbval": pytest,
        f"pytest -n {workers} --nbval": [*pytest, "-n", str(workers)],
        "ipyagent run --replay --jobs 1": [*run, "1"],
        f"ipyagent run --replay --jobs {workers}": [*run, str(workers)],
    }


def time_command(command: list[str]) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("IPYAGENT_REPLAY", "JPY_SESSION_NAME")}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    notebooks = len(list((ROOT / "notebooks").glob("*.ipynb")))
    load_before = os.getloadavg()[0]
    rows = []
    serial = None
    for name, command in commands(args.workers).items():
        times = [time_command(command) for _ in range(args.repeat)]
        median = statistics.median(times)
        serial = serial or median
        rows.append([name, median, min(times), max(times), f"{serial / median:.2f}x"])
    report(
        "notebooks",
        ["command", "wall s (median)", "min s", "max s", "vs serial pytest"],
        rows,
        {
            "notebooks": notebooks,
            "cores": os.cpu_count(),
            "repeat": args.repeat,
            "cpu load (1 min) before / after": f"{load_before:.1f} / {os.getloadavg()[0]:.1f}",
        },
    )


if __name__ == "__main__":
    main()
