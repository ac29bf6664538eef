"""Assembling the notebook's context for a prompt: a 200-cell notebook and 1,000 variables, one of
them a DataFrame of 1,000,000 rows.

    python bench/context.py [--repeat 20]

Measures what ``%%agent --context all`` does before each prompt (read the saved notebook's
outline, summarize the variables, render within the token budget): p50 and p95 wall time, and
the context's size. Target (issue 17): under 50 ms and under the token budget.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from _report import report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    import nbformat
    import numpy as np
    import pandas as pd

    from ipyagent.kernel.context import (
        DEFAULT_BUDGET,
        PARTS,
        render_context,
        saved_outline,
        variable_summaries,
    )

    work = Path(tempfile.mkdtemp())
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(f"frame_{n} = load('part-{n}.csv')\nframe_{n}.describe()")
        for n in range(200)
    ]
    path = work / "analysis.ipynb"
    nbformat.write(notebook, path)
    namespace: dict[str, object] = {f"value_{n}": n for n in range(997)}
    namespace["big"] = pd.DataFrame(
        {"a": np.arange(1_000_000), "b": np.random.default_rng(0).random(1_000_000)}
    )
    namespace["names"] = ["x"] * 10_000
    namespace["matrix"] = np.zeros((1000, 1000))

    times, sizes = [], []
    for _ in range(args.repeat):
        started = time.perf_counter()
        context = render_context(
            PARTS,
            cells=saved_outline(path),
            current_id=None,
            variables=variable_summaries(namespace),
            last_error="KeyError: 'region'",
        )
        times.append((time.perf_counter() - started) * 1000)
        assert context is not None
        sizes.append(context.tokens)
    p50 = statistics.median(times)
    p95 = sorted(times)[max(0, round(0.95 * len(times)) - 1)]
    rows = [
        [
            "200 cells, 1,000 variables (1M-row DataFrame)",
            f"{p50:.1f}",
            f"{p95:.1f}",
            sizes[-1],
            DEFAULT_BUDGET,
        ]
    ]
    report(
        "context",
        ["case", "p50 ms", "p95 ms", "tokens", "budget"],
        rows,
        {"target": "under 50 ms and under the token budget", "repeat": args.repeat},
    )


if __name__ == "__main__":
    main()
