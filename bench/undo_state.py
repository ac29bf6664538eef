"""The variables' checkpoint's cost (``ipyagent/kernel/variable_checkpoint.py``): time and peak
memory to checkpoint a DataFrame before the agent's code runs, to check after the call whether it
changed, and to put it back on undo — for 1 MB, 100 MB and 1 GB frames.

    python bench/undo_state.py [--sizes 1MB,100MB,1GB] [--repeat 5]

The frames are float64 (8 columns), in a namespace of their own (what the checkpoint does is
the same in a kernel; the kernel adds one main-thread hop per call). Per size, medians of
``--repeat`` runs (at most 2 for frames of 1 GB or more):

- ``checkpoint``: ``before()`` of a call that names the frame: the size estimate and
  ``DataFrame.copy(deep=True)``;
- ``2nd call``: ``before()`` of the same run's next call: the copy is reused (one per run);
- ``check: changed`` / ``check: unchanged``: ``after()`` when the code set the last cell / only read
  the frame (``DataFrame.equals`` against the copy: a change in the last row is its worst case,
  one found early stops it early);
- ``undo``: ``undo()`` of the run that changed it (a rebinding to the copy);
- ``peak extra``: the most memory ``before()`` allocated beyond the frame (tracemalloc, numpy's
  buffers included), and that over the frame's size.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from types import SimpleNamespace
from typing import Any

from _report import report

from ipyagent.kernel.variable_checkpoint import VariableCheckpoints, default_cap, parse_size

COLUMNS = 8


def frame(size: int) -> Any:
    import numpy as np
    import pandas as pd

    rows = max(1, size // (8 * COLUMNS))
    data = np.random.default_rng(0).random((rows, COLUMNS))
    return pd.DataFrame(data, columns=[f"c{i}" for i in range(COLUMNS)])


def one_run(df: Any, run: int) -> dict[str, float]:
    """One agent run on ``df``: a call that reads it, one that changes a cell, then its undo."""
    ns: dict[str, Any] = {"df": df}
    store = VariableCheckpoints(SimpleNamespace(user_ns=ns, user_ns_hidden={}))
    store.limit = "0"  # no cap: the cost of the copy itself is measured
    run_id = f"run-{run}"
    took: dict[str, float] = {}

    started = time.perf_counter()
    call = store.before(run_id, "total = df['c0'].sum()")
    took["checkpoint"] = time.perf_counter() - started
    exec("total = df['c0'].sum()", ns)
    started = time.perf_counter()
    store.after(call)
    took["check: unchanged"] = time.perf_counter() - started

    started = time.perf_counter()
    call = store.before(run_id, "df.iloc[-1, -1] = -1.0")
    took["2nd call"] = time.perf_counter() - started
    exec("df.iloc[-1, -1] = -1.0", ns)
    started = time.perf_counter()
    store.after(call)
    took["check: changed"] = time.perf_counter() - started

    store.finish(run_id)
    started = time.perf_counter()
    undone = store.undo(run_id)
    took["undo"] = time.perf_counter() - started
    assert undone.restored == ("df",) and ns["df"].iloc[-1, -1] != -1.0, undone
    return took


def peak_extra(df: Any) -> int:
    """Bytes ``before()`` allocated at most, beyond what was there."""
    ns: dict[str, Any] = {"df": df}
    store = VariableCheckpoints(SimpleNamespace(user_ns=ns, user_ns_hidden={}))
    store.limit = "0"
    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    store.before("run-peak", "df.iloc[-1, -1] = -1.0")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak - base


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--sizes", default="1MB,100MB,1GB", help="frame sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    phases = ["checkpoint", "2nd call", "check: unchanged", "check: changed", "undo"]
    rows = []
    for label in [s.strip() for s in args.sizes.split(",") if s.strip()]:
        size = parse_size(label)
        if size is None:
            parser.error(f"not a size: {label!r}")
        df = frame(size)
        actual = int(df.memory_usage(index=True, deep=False).sum())
        repeat = min(args.repeat, 2) if size >= 1 << 30 else args.repeat
        runs = []
        for i in range(repeat):
            runs.append(one_run(df.copy(), i))
            gc.collect()
        extra = peak_extra(df.copy())
        ms = {p: statistics.median(r[p] for r in runs) * 1000 for p in phases}
        rows.append(
            [
                label,
                f"{len(df):,}",
                *(round(ms[p], 2) for p in phases),
                round(extra / 1e6, 1),
                round(extra / actual, 2),
            ]
        )
        del df
        gc.collect()
    columns = [
        "frame",
        "rows",
        *(f"{p} (ms)" for p in phases),
        "peak extra (MB)",
        "extra / frame",
    ]
    cap = default_cap()
    report(
        "undo_state",
        columns,
        rows,
        {
            "columns_per_frame": COLUMNS,
            "repeat": args.repeat,
            "default_cap_here_bytes": cap,
            "note": "medians; no cap while measuring; the default cap on this machine now is "
            f"{cap / (1 << 30):.2f} GiB",
        },
    )


if __name__ == "__main__":
    main()
