"""The variables' checkpoint of a run, on a namespace of its own: what is copied before the code
runs, what is said when something cannot be, what an undo puts back and what it leaves alone."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from ipyagent.kernel.variable_checkpoint import (
    CAP_ENV,
    VariableCheckpoints,
    copy_value,
    estimate_bytes,
    parse_size,
)


def checkpoints(**names: Any) -> tuple[VariableCheckpoints, dict[str, Any]]:
    ns: dict[str, Any] = {"In": [], "_": None, **names}
    store = VariableCheckpoints(SimpleNamespace(user_ns=ns, user_ns_hidden={"In": []}))
    store.limit = "1GB"
    return store, ns


def run(store: VariableCheckpoints, ns: dict[str, Any], run_id: str, code: str) -> str:
    """Run ``code`` as one call of run ``run_id``; the warning said before it ran."""
    call = store.before(run_id, code)
    try:
        exec(code, ns)
    finally:
        store.after(call)
    return call.warning()


def test_undo_puts_back_a_mutated_frame_a_rebound_name_and_removes_a_new_one() -> None:
    df = pd.DataFrame({"a": [1, 2, 3], "b": [4.0, 5.0, 6.0]})
    original = df.copy()
    store, ns = checkpoints(df=df, x=1)
    assert run(store, ns, "r1", "df.pop('a')\ndf.loc[0, 'b'] = 9.0\ndf['c'] = 1") == ""
    assert run(store, ns, "r1", "x = 2\ny = [1]") == ""
    store.finish("r1")
    assert store.changed_names("r1") == ("df", "x", "y")
    undone = store.undo("r1")
    assert (undone.restored, undone.removed, undone.kept) == (("df", "x"), ("y",), ())
    pd.testing.assert_frame_equal(ns["df"], original)
    assert ns["x"] == 1 and "y" not in ns
    assert store.undo("r1").anything is False, "a run is undone once"


@pytest.mark.parametrize("copy_on_write", [True, False], ids=["copy-on-write", "deep-copy"])
def test_a_frame_changed_in_place_is_put_back_whether_pandas_copies_on_write_or_not(
    copy_on_write: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ipyagent.kernel import variable_checkpoint

    assert variable_checkpoint.pandas_copy_on_write(), "pandas 3 always copies on write"
    monkeypatch.setattr(variable_checkpoint, "pandas_copy_on_write", lambda: copy_on_write)
    df = pd.DataFrame({"a": np.arange(5.0), "b": list("vwxyz")})
    df.attrs["source"] = "survey"
    original = df.copy()
    store, ns = checkpoints(df=df)
    run(store, ns, "r1", "print(df.a.sum())")
    [entry] = store._runs["r1"].entries.values()
    assert not entry.mutated, "a read is no change"
    run(store, ns, "r1", "df.iloc[-1, 0] = -1.0\ndf.attrs['source'] = 'mine'\ndf.index.name = 'row'")
    assert entry.mutated
    store.undo("r1")
    pd.testing.assert_frame_equal(ns["df"], original)
    assert ns["df"].attrs == {"source": "survey"}


def test_a_frame_is_copied_once_per_run_and_unchanged_copies_are_dropped_at_its_end() -> None:
    df = pd.DataFrame({"a": range(10)})
    store, ns = checkpoints(df=df, alias=df)
    run(store, ns, "r1", "print(df.shape)")
    run(store, ns, "r1", "total = alias['a'].sum()")
    [state] = store._runs.values()
    assert len(state.copies) == 1, "one copy for both calls and both names"
    store.finish("r1")
    assert store.changed_names("r1") == ("total",)
    assert store._runs["r1"].copies == {}, "the frame did not change: its copy is gone"


def test_a_list_changed_in_place_is_put_back_in_place_for_every_name() -> None:
    data = [1, 2]
    store, ns = checkpoints(data=data, same=data)
    run(store, ns, "r1", "data.append(3)\ndata += [4]")
    store.undo("r1")
    assert ns["data"] is data and ns["same"] is data and data == [1, 2]


def test_numpy_arrays_are_copied_and_restored_in_place() -> None:
    arr = np.arange(5.0)
    store, ns = checkpoints(arr=arr)
    run(store, ns, "r1", "arr[0] = 99\narr *= 2")
    assert store.undo("r1").restored == ("arr",)
    assert ns["arr"] is arr and arr.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_what_cannot_be_copied_is_said_before_the_code_runs_once_per_run() -> None:
    def numbers() -> Any:
        yield from range(3)

    store, ns = checkpoints(gen=numbers(), x=[1])
    warning = run(store, ns, "r1", "first = next(gen)")
    assert warning.startswith("An undo of this run cannot put back gen (generator: it cannot be copied")
    assert warning.endswith("if this code changes it, an undo leaves it as it is.")
    assert run(store, ns, "r1", "second = next(gen)") == "", "said once per run"
    undone = store.undo("r1")
    assert set(undone.removed) == {"first", "second"}


def test_a_value_over_the_cap_is_said_before_the_code_runs_and_its_rebinding_still_undone() -> None:
    big = np.zeros(1_000_000)  # 8 MB
    store, ns = checkpoints(big=big)
    store.limit = "1MB"
    warning = run(store, ns, "r1", "big = big[:10]")
    assert "big (numpy.ndarray, about 7.6 MB: over the undo memory cap of 1.0 MB" in warning
    assert "%config AgentMagics.undo_memory" in warning and CAP_ENV in warning
    assert store.undo("r1").restored == ("big",)
    assert ns["big"] is big


def test_modules_and_functions_are_not_copied_and_said_only_when_assigned_into() -> None:
    import math

    store, ns = checkpoints(math=math, f=len)
    assert run(store, ns, "r1", "r = math.sqrt(4)") == ""
    warning = run(store, ns, "r2", "math.answer = 42")
    assert "math (module: code, not copied)" in warning
    del math.answer  # type: ignore[attr-defined]


def test_undo_of_an_older_run_leaves_what_a_later_run_changed_and_what_was_rebound_since() -> None:
    store, ns = checkpoints(a=1, b=1, c=1)
    run(store, ns, "r1", "a = 2\nb = 2\nc = 2")
    run(store, ns, "r2", "b = 3")
    ns["c"] = "the user's"
    undone = store.undo("r1")
    assert undone.restored == ("a",)
    assert [(k.name, k.why) for k in undone.kept] == [
        ("b", "changed by a later run, r2"),
        ("c", "changed since the run"),
    ]
    assert ns == {**ns, "a": 1, "b": 3, "c": "the user's"}
    assert store.undo(None).run == "r2", "the latest run with variables left"
    assert ns["b"] == 2


def test_undo_is_refused_while_the_agents_code_runs() -> None:
    store, ns = checkpoints(a=1)
    run(store, ns, "r1", "a = 2")
    call = store.before("r2", "b = 1")
    assert store.undo("r1").refused.startswith("the agent's code is running now")
    store.abandon(call)
    assert store.undo("r1").restored == ("a",)


def test_a_run_that_changed_nothing_leaves_no_checkpoint() -> None:
    store, ns = checkpoints(df=pd.DataFrame({"a": [1]}))
    run(store, ns, "r1", "print(len(df))")
    store.finish("r1")
    assert store.latest() is None and not store.undo("r1").anything


def test_copies_and_sizes() -> None:
    df = pd.DataFrame({"a": np.arange(1000, dtype="int64")})
    assert estimate_bytes(df) >= 8000
    assert copy_value(df) is not df and copy_value(df).equals(df)
    assert estimate_bytes({"k": [1, 2, 3]}) > 0
    assert parse_size("2GB") == 2 << 30 and parse_size("500 mb") == 500 << 20 and parse_size("x") is None
    with pytest.raises(TypeError):
        copy_value(x for x in [])
