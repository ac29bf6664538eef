"""pytest plugin: run agent notebooks against recorded model streams.

    pytest --nbval notebooks/ --ipyagent-replay=replay     # offline: no key, no network

``--ipyagent-replay=record|replay|off`` (or ``ipyagent_replay = "replay"`` in the pytest
configuration) sets ``$IPYAGENT_REPLAY`` for the whole test session, so every kernel nbval
starts inherits it; see :mod:`ipyagent.kernel.replay`. While record or replay is on, a kernel
started for a notebook is also told which notebook it runs (``$JPY_SESSION_NAME``, as Jupyter
Server does), so ``analysis.ipynb`` finds ``analysis.cassette.jsonl`` beside it. Every notebook
kernel is told it runs headless (``$IPYAGENT_HEADLESS``), so the agent's notebook tools leave the
notebook under test unchanged.

This module owns the option and the environment it sets, nothing else; it is registered as the
``ipyagent`` pytest11 entry point.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

__all__ = ["pytest_addoption", "pytest_configure", "pytest_report_header", "pytest_unconfigure"]

ENV_MODE = "IPYAGENT_REPLAY"  # the same names as ipyagent.kernel, without importing it
ENV_HEADLESS = "IPYAGENT_HEADLESS"
MODES = ("record", "replay", "off")
_saved = pytest.StashKey[tuple[bool, str | None]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ipyagent", "ipyagent notebooks")
    group.addoption(
        "--ipyagent-replay",
        choices=MODES,
        default=None,
        help="record: kernels record every model request to the notebook's cassette; replay: they "
        "answer from it (offline, no key); off: they call the model. Sets $IPYAGENT_REPLAY.",
    )
    parser.addini("ipyagent_replay", "Default for --ipyagent-replay (record, replay or off).", default="")


def _mode(config: pytest.Config) -> str | None:
    value = config.getoption("ipyagent_replay") or str(config.getini("ipyagent_replay")).strip()
    if value and value not in MODES:
        raise pytest.UsageError(f"ipyagent_replay = {value!r}: use one of {', '.join(MODES)}.")
    return value or None


def pytest_configure(config: pytest.Config) -> None:
    mode = _mode(config)
    if mode is None:
        return
    config.stash[_saved] = (ENV_MODE in os.environ, os.environ.get(ENV_MODE))
    os.environ[ENV_MODE] = mode


def pytest_unconfigure(config: pytest.Config) -> None:
    saved = config.stash.get(_saved, None)
    if saved is None:
        return
    existed, value = saved
    if existed and value is not None:
        os.environ[ENV_MODE] = value
    else:
        os.environ.pop(ENV_MODE, None)


def pytest_report_header(config: pytest.Config) -> str | None:
    mode = os.environ.get(ENV_MODE)
    return f"ipyagent replay: {mode}" if mode else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    # nbval starts a notebook's kernel while setting up its first cell: tell that kernel it runs
    # headless (its notebook tools must not edit the file under test) and, while record or replay
    # is on, which notebook it runs; then restore the environment for whatever runs next here.
    # The name is set even when the variable is already there: pytest run from a notebook's
    # kernel inherits that notebook's name, which is not the one under test.
    path = getattr(item, "path", None)
    if path is None or path.suffix != ".ipynb":
        return (yield)
    values = {ENV_HEADLESS: "1"}
    if os.environ.get(ENV_MODE, "off").strip().lower() not in ("", "off"):
        values["JPY_SESSION_NAME"] = str(path.resolve())
    previous = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        return (yield)
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
