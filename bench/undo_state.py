"""The variables' checkpoint's cost (``ipyagent/kernel/variable_checkpoint.py``): time and peak
memory to checkpoint a DataFrame before the agent's code runs, to check after the call whether it
changed, and to put it back on undo — for 1 MB, 100 MB and 1 GB frames.

    python bench/undo_state.py [--sizes 1MB,100MB,1GB] [--repeat 5]

The frames are float64 (8 columns, one block), in a namespace of their own (what the checkpoint
does is the same in a kernel; the kernel adds one main-thread hop per call). Two ways to copy:

- ``copy-on-write``: what the kernel does under pandas 3 (or pandas 2 with copy-on-write on): a
  shallow copy, a snapshot because pandas copies a shared block before writing to it — so the
  code's first write to the frame pays for the copy of the block it writes to;
- ``deep copy``: ``DataFrame.copy(deep=True)`` up front (pandas 2 without copy-on-write).

Per size and way, medians of ``--repeat`` runs (at most 2 for frames of 1 GB or more):

- ``checkpoint``: ``before()`` of a call that names the frame (the size estimate and the copy);
- ``2nd call``: ``before()`` of the same run's next call: the copy is reused (one per run);
- ``check: unchanged``: ``after()`` of a call that only read the frame;
- ``write``: the code's own ``df.iloc[-1, -1] = -1.0`` with the checkpoint held (without one it
  takes microseconds);
- ``check: changed``: ``after()`` of that call (a change in the last row: ``equals``' worst case);
- ``undo``: ``undo()`` of the run (a rebinding to the copy);
- ``peak extra``: the most memory allocated beyond the frame (tracemalloc, numpy's buffers
  included) by ``before()`` and by the write, over the frame's size.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import time
import tracemalloc
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from _report import report

from ipyagent.kernel import variable_checkpoint
from ipyagent.kernel.variable_checkpoint import VariableCheckpoints, default_cap, parse_size

COLUMNS = 8
PHASES = ["checkpoint", "2nd call", "check: unchanged", "write", "check: changed", "undo"]
READ = "total = df['c0'].sum()"
WRITE = "df.iloc[-1, -1] = -1.0"


def frame(size: int) -> Any:
    import numpy as np
    import pandas as pd

    rows = max(1, size // (8 * COLUMNS))
    data = np.random.default_rng(0).random((rows, COLUMNS))
    return pd.DataFrame(data, columns=[f"c{i}" for i in range(COLUMNS)])


@contextlib.contextmanager
def copying(way: str) -> Iterator[None]:
    real = variable_checkpoint.pandas_copy_on_write
    if way == "deep copy":
        variable_checkpoint.pandas_copy_on_write = lambda: False  # type: ignore[assignment]
    try:
        yield
    finally:
        variable_checkpoint.pandas_copy_on_write = real  # type: ignore[assignment]


def store_for(ns: dict[str, Any]) -> VariableCheckpoints:
    store = VariableCheckpoints(SimpleNamespace(user_ns=ns, user_ns_hidden={}))
    store.limit = "0"  # no cap: the cost of the copy itself is measured
    return store


def timed(took: dict[str, float], phase: str, fn: Any) -> Any:
    started = time.perf_counter()
    value = fn()
    took[phase] = time.perf_counter() - started
    return value


def one_run(df: Any, run: int) -> dict[str, float]:
    """One agent run on ``df``: a call that reads it, one that changes a cell, then its undo."""
    ns: dict[str, Any] = {"df": df}
    store = store_for(ns)
    run_id = f"run-{run}"
    took: dict[str, float] = {}
    call = timed(took, "checkpoint", lambda: store.before(run_id, READ))
    exec(READ, ns)
    timed(took, "check: unchanged", lambda: store.after(call))
    call = timed(took, "2nd call", lambda: store.before(run_id, WRITE))
    timed(took, "write", lambda: exec(WRITE, ns))
    timed(took, "check: changed", lambda: store.after(call))
    store.finish(run_id)
    undone = timed(took, "undo", lambda: store.undo(run_id))
    assert undone.restored == ("df",) and ns["df"].iloc[-1, -1] != -1.0, undone
    return took


def peak_extra(df: Any) -> tuple[int, int]:
    """Bytes ``before()`` and then the code's write allocated at most, beyond what was there."""
    ns: dict[str, Any] = {"df": df}
    store = store_for(ns)
    gc.collect()
    tracemalloc.start()
    peaks = []
    for step in (lambda: store.before("run-peak", WRITE), lambda: exec(WRITE, ns)):
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        step()
        peaks.append(tracemalloc.get_traced_memory()[1] - base)
    tracemalloc.stop()
    return peaks[0], peaks[1]


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--sizes", default="1MB,100MB,1GB", help="frame sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for label in [s.strip() for s in args.sizes.split(",") if s.strip()]:
        size = parse_size(label)
        if size is None:
            parser.error(f"not a size: {label!r}")
        df = frame(size)
        actual = int(df.memory_usage(index=True, deep=False).sum())
        repeat = min(args.repeat, 2) if size >= 1 << 30 else args.repeat
        for way in ("copy-on-write", "deep copy"):
            with copying(way):
                runs = []
                for i in range(repeat):
                    runs.append(one_run(df.copy(), i))
                    gc.collect()
                at_checkpoint, at_write = peak_extra(df.copy())
            ms = {p: statistics.median(r[p] for r in runs) * 1000 for p in PHASES}
            rows.append(
                [
                    label,
                    way,
                    *(round(ms[p], 2) for p in PHASES),
                    f"{at_checkpoint / actual:.2f} / {at_write / actual:.2f}",
                ]
            )
            gc.collect()
        del df
        gc.collect()
    columns = ["frame", "copy", *(f"{p} (ms)" for p in PHASES), "peak extra / frame: checkpoint / write"]
    cap = default_cap()
    report(
        "undo_state",
        columns,
        rows,
        {
            "columns_per_frame": COLUMNS,
            "repeat": args.repeat,
            "pandas_copy_on_write": variable_checkpoint.pandas_copy_on_write(),
            "default_cap_here_bytes": cap,
            "note": "medians; no cap while measuring; the default cap on this machine now is "
            f"{cap / (1 << 30):.2f} GiB",
        },
    )


if __name__ == "__main__":
    main()
