"""pytest plugin: agent notebooks under nbval replay their committed cassettes by default.

    pytest --nbval notebooks/                              # offline: no key, no network
    pytest --nbval notebooks/ --ipyagent-replay=record     # a real model answers; cassettes rewritten
    pytest --nbval notebooks/ --ipyagent-replay=live       # a real model answers; nothing recorded

By default (like pytest-recording: replay, never record) a notebook with a cassette beside it
(``analysis.ipynb`` → ``analysis.cassette.jsonl``) replays it: the kernel answers every model
request from the recording and fails with a diff on any new or changed request. A notebook with
agent cells and no cassette fails those cells with a message that says how to record one; a
notebook without agent cells is left alone. ``--ipyagent-replay=replay|record|live`` (or
``ipyagent_replay = ...`` in the pytest configuration, or ``$IPYAGENT_REPLAY`` set by the user)
applies one mode to every notebook; ``off`` is another name for ``live``.

The mode reaches each notebook's kernel through ``$IPYAGENT_REPLAY``, set while nbval starts it
(see :mod:`ipyagent.kernel.cassettes`). The kernel is also told which notebook it runs
(``$JPY_SESSION_NAME``, as Jupyter Server does), so it finds the cassette beside it, and that it
runs headless (``$IPYAGENT_HEADLESS``), so the agent's notebook tools leave the notebook under
test unchanged.

This module owns the option and the environment it sets, nothing else; it is registered as the
``ipyagent`` pytest11 entry point, so it stays cheap to import: the kernel layer is imported only
when a notebook is tested.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "pytest_addoption",
    "pytest_report_header",
    "pytest_runtest_setup",
    "pytest_xdist_make_scheduler",
]

ENV_MODE = "IPYAGENT_REPLAY"  # the same names as ipyagent.kernel, without importing it
ENV_HEADLESS = "IPYAGENT_HEADLESS"
MODES = ("replay", "record", "live", "off")
#: ``%%agent`` opens a cell; ``%agent chat`` may stand on any line of one.
_AGENT_CELL = re.compile(r"\A\s*%%agent\b|^(\w+\s*=\s*)?%agent chat\b", re.MULTILINE)
_asks_the_model = pytest.StashKey[dict[Path, bool]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ipyagent", "ipyagent notebooks")
    group.addoption(
        "--ipyagent-replay",
        choices=MODES,
        default=None,
        help="replay: every notebook's kernel answers from its cassette (offline, no key); record: a "
        "real model answers and each cassette is recorded again; live (or off): a real model answers, "
        "nothing is recorded. Default: notebooks with a cassette replay it.",
    )
    parser.addini("ipyagent_replay", "Default for --ipyagent-replay (replay, record or live).", default="")


def _chosen_mode(config: pytest.Config) -> str | None:
    """The mode the user chose for every notebook, if any; None means: by notebook."""
    value = config.getoption("ipyagent_replay") or str(config.getini("ipyagent_replay")).strip()
    if value and value not in MODES:
        raise pytest.UsageError(f"ipyagent_replay = {value!r}: use one of replay, record or live.")
    value = value or os.environ.get(ENV_MODE, "").strip().lower()
    return {"live": "off"}.get(value, value) or None


def pytest_report_header(config: pytest.Config) -> str:
    mode = _chosen_mode(config)
    chosen = {"off": "live", None: "notebooks with a cassette replay it"}.get(mode, mode)
    return f"ipyagent replay: {chosen}"


def _asks(config: pytest.Config, notebook: Path) -> bool:
    """Whether ``notebook`` has a cell that asks the model: ``%%agent`` or ``%agent chat``."""
    seen = config.stash.setdefault(_asks_the_model, {})
    if notebook not in seen:
        try:
            cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
        except (OSError, ValueError):
            cells = []
        seen[notebook] = any(_cell_asks(cell) for cell in cells)
    return seen[notebook]


def _cell_asks(cell: object) -> bool:
    if not isinstance(cell, dict) or cell.get("cell_type") != "code":
        return False
    source = cell.get("source", "")
    return bool(_AGENT_CELL.search(source if isinstance(source, str) else "".join(source)))


def _no_cassette(notebook: Path, cassette: Path) -> str:
    return (
        f"{notebook.name} asks the model but has no cassette to replay ({cassette.name} is missing), "
        "so it cannot be tested offline. Record one with a real model, once:\n"
        f"    python -m ipyagent run {notebook} --record\n"
        "then commit the notebook with its cassette. Or test against a live model: "
        "pytest --nbval --ipyagent-replay=live."
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    # nbval starts a notebook's kernel while setting up its first cell: tell that kernel it runs
    # headless, which notebook it runs and whether it replays, records or calls the model; then
    # restore the environment for whatever runs next here. The name is set even when the
    # variable is already there: pytest run from a notebook's kernel inherits that notebook's
    # name, which is not the one under test.
    path = getattr(item, "path", None)
    if path is None or path.suffix != ".ipynb":
        return (yield)
    notebook = Path(path).resolve()
    values = {ENV_HEADLESS: "1", "JPY_SESSION_NAME": str(notebook)}
    mode = _chosen_mode(item.config)
    if mode is None and _asks(item.config, notebook):
        from .kernel.cassettes import ReplaySwitch

        cassette = ReplaySwitch(path=os.environ.get("IPYAGENT_CASSETTE") or None).cassette_path(notebook)
        if not cassette.exists():
            if _cell_asks(getattr(item, "cell", None)):
                pytest.fail(_no_cassette(Path(path), cassette), pytrace=False)
        else:
            mode = "replay"
    if mode is not None:
        values[ENV_MODE] = mode
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


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``pytest -n auto --nbval``: the cells of one notebook share a kernel and run in order, so
    they must go to one worker. pytest-xdist's default (``--dist load``) hands out single items;
    with nbval on, it hands out whole files instead (``loadscope``: a notebook's scope is its
    file). Other ``--dist`` modes are the user's choice and left alone."""
    nbval = config.getoption("nbval", False) or config.getoption("nbval_lax", False)
    if not nbval or config.getoption("dist", None) != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    return LoadScopeScheduling(config, log)
