"""The kernel's record/replay switch: which cassette a notebook uses, and whether it records.

    %agent cassette record [PATH]     record every model request of this kernel (a real model answers)
    %agent cassette replay [PATH]     answer from the cassette: no key, no network, no local model
    %agent cassette off               talk to the model directly again
    %agent cassette                   show the mode, the cassette and how far it got

The mode starts from ``$IPYAGENT_REPLAY`` (``record``, ``replay`` or ``off``) and the cassette from
``$IPYAGENT_CASSETTE``; by default ``analysis.ipynb`` uses ``analysis.cassette.jsonl`` beside it
(``ipyagent.cassette.jsonl`` in the working directory when the kernel does not know its notebook).
The pytest option ``--ipyagent-replay`` sets the variable for the kernels nbval starts.
A recording asks the model for deterministic decoding where it has one (the embedded model's
greedy decoding), so recording an unchanged notebook again gives the same cassette.

This module owns the per-kernel state and :meth:`ReplaySwitch.wrap`, which the magics call on the
model of every ``%%agent`` run; the cassette format and the matching are
:mod:`ipyagent.agentlib.providers.replay`'s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .user_error import user_error

if TYPE_CHECKING:  # the agent core loads at the first %%agent, not at %load_ext
    from ..agentlib.model import Provider
    from ..agentlib.providers.replay import Cassette, ReplayModel

__all__ = [
    "ENV_CASSETTE",
    "ENV_MODE",
    "Mode",
    "ReplaySwitch",
    "cassette_path",
    "command",
    "replay_mode",
]

#: What differs between two runners of one notebook, not between runs, scrubbed before a request
#: is recorded or compared: the number a cell the agent runs takes (``run_cell``: under
#: ``python -m ipyagent run`` the kernel counts cells as a front end does, nbval runs them with
#: ``store_history=False``), and the file a cell's code is compiled from, named after the kernel's
#: process (it shows in the tracebacks ``%agent fix`` sends); and between environments: where
#: Python and its packages are installed (a traceback's library frames), and a DataFrame's memory
#: in ``describe_variable`` (pandas keeps strings in Arrow where pyarrow is installed, and they
#: take another size).
KERNEL_SCRUBS: tuple[tuple[str, str], ...] = (
    (r"\(execution count \d+\)", "(execution count …)"),
    (r"[^\s\"']*ipykernel_\d+/\d+\.py", "<cell>"),
    (r"[^\s\"']*/(?:site|dist)-packages/", "<site-packages>/"),
    (r"[^\s\"'<>]*/lib/python3\.\d+/", "<stdlib>/"),
    (r"\bmemory: [\d,]+ bytes", "memory: … bytes"),
)

Mode = Literal["off", "record", "replay"]
MODES: tuple[Mode, ...] = ("record", "replay", "off")
ENV_MODE = "IPYAGENT_REPLAY"
ENV_CASSETTE = "IPYAGENT_CASSETTE"
USAGE = "%agent cassette [record|replay|off] [PATH]"


def cassette_path(notebook: Path | None) -> Path:
    """``analysis.ipynb`` → ``analysis.cassette.jsonl`` beside it; no notebook → the working
    directory's ``ipyagent.cassette.jsonl``."""
    if notebook is None:
        return Path.cwd() / "ipyagent.cassette.jsonl"
    return notebook.with_name(f"{notebook.stem}.cassette.jsonl")


def _mode(value: str, source: str) -> Mode:
    mode = value.strip().lower() or "off"
    if mode not in MODES:
        raise user_error(
            f"{source}={value!r} is not a replay mode.",
            f"Use one of: {', '.join(MODES)} ({USAGE}).",
            "invalid_option",
        )
    return mode


class ReplaySwitch:
    """Record/replay state of one kernel: the mode, an explicit cassette path (else the
    notebook's default), and one open :class:`Cassette` per path, so successive cells go on
    where the previous one stopped."""

    def __init__(self, mode: Mode = "off", path: str | os.PathLike[str] | None = None) -> None:
        self.mode: Mode = "off"
        self.path: Path | None = None
        self._cassettes: dict[Path, Cassette] = {}
        self._models: dict[tuple[Path, str], ReplayModel] = {}
        #: Providers this switch resolved from a model id to record them: its own to close.
        self._resolved: list[Provider] = []
        self.set(mode, path)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ReplaySwitch:
        """The switch as ``$IPYAGENT_REPLAY`` and ``$IPYAGENT_CASSETTE`` set it."""
        env = os.environ if environ is None else environ
        return cls(_mode(env.get(ENV_MODE, ""), ENV_MODE), env.get(ENV_CASSETTE) or None)

    def set(self, mode: str, path: str | os.PathLike[str] | None = None) -> None:
        """Switch to ``mode`` (``record``, ``replay`` or ``off``) with the cassette at ``path``
        (default: beside the notebook). A recording starts a new cassette; a replay starts
        from its first request."""
        self.mode = _mode(mode, "mode")
        self.path = Path(path).expanduser().resolve() if path is not None else None
        self._cassettes.clear()
        self._models.clear()
        self.close()

    def close(self) -> None:
        """Let go of the providers resolved for recording (an HTTP provider's pooled client)."""
        resolved, self._resolved = self._resolved, []
        for provider in resolved:
            close = getattr(provider, "close", None)
            if close is not None:
                close()

    @property
    def active(self) -> bool:
        """Recording or replaying: conversations should start empty, so runs repeat exactly."""
        return self.mode != "off"

    def cassette_path(self, notebook: Path | None) -> Path:
        return self.path if self.path is not None else cassette_path(notebook)

    def cassette(self, notebook: Path | None) -> Cassette:
        from ..agentlib.providers.replay import Cassette

        path = self.cassette_path(notebook)
        if path not in self._cassettes:
            self._cassettes[path] = Cassette(path)
        return self._cassettes[path]

    def wrap(self, model: str | Provider | None, notebook: Path | None) -> str | Provider | None:
        """The model a run should use: ``model`` itself when off; otherwise a :class:`ReplayModel`
        on this kernel's cassette. In replay mode nothing is resolved — no key or local model is
        needed — and ``model`` (when given) is the model the recording must have used."""
        from ..agentlib.providers.replay import ReplayModel

        if self.mode == "off" or isinstance(model, ReplayModel):
            return model
        cassette = self.cassette(notebook)
        key = (cassette.path, model if isinstance(model, str) else f"<{id(model)}>")
        cached = self._models.get(key)
        if cached is not None:
            return cached
        workspace = notebook.parent if notebook is not None else Path.cwd()
        hint = (
            f"If the change is intended, record {cassette.path.name} again with a real model: "
            f"python -m ipyagent run {notebook.name if notebook else 'NOTEBOOK'} --record, or run the "
            "notebook in a kernel started with IPYAGENT_REPLAY=record (or after `%agent cassette record`) "
            "and save it."
        )
        if self.mode == "record":
            if model is not None and not isinstance(model, str):
                wrapped = model  # the caller's: the caller closes it
            else:
                wrapped = _resolve(model)
                self._resolved.append(wrapped)
            made = ReplayModel(
                wrapped,
                cassette=cassette,
                mode="record",
                workspace=workspace,
                scrub=KERNEL_SCRUBS,
                rerecord_hint=hint,
            )
        else:
            # Never called: a given model only names what the recording must have used.
            made = ReplayModel(
                None if model is None or isinstance(model, str) else model,
                cassette=cassette,
                mode="replay",
                model_id=model if isinstance(model, str) else None,
                workspace=workspace,
                scrub=KERNEL_SCRUBS,
                rerecord_hint=hint,
            )
        self._models[key] = made
        return made

    def status(self, notebook: Path | None) -> str:
        if self.mode == "off":
            return (
                "cassette: off (record with `%agent cassette record`, replay with `%agent cassette replay`)"
            )
        cassette = self.cassette(notebook)
        if self.mode == "record":
            return f"cassette: recording to {cassette.path} ({cassette.written} request(s) recorded)"
        try:
            total = f"of {len(cassette.records)} "
        except Exception as exc:  # missing or damaged: say so here, the next %%agent fails with the hint
            total = f"— {exc} "
        return f"cassette: replaying {cassette.path} ({cassette.position} {total}request(s) served)"


def _resolve(model: str | None) -> Provider:
    from ..agentlib.endpoints import default_model_id, provider_for

    return provider_for(model or default_model_id())


_switch: ReplaySwitch | None = None


def replay_mode() -> ReplaySwitch:
    """This kernel's switch, created from the environment on first use."""
    global _switch
    if _switch is None:
        _switch = ReplaySwitch.from_env()
    return _switch


def command(args: list[str], *, notebook: Path | None = None) -> str:
    """``%agent cassette [record|replay|off] [PATH]``: set the mode, or with no arguments show it."""
    switch = replay_mode()
    if not args:
        return switch.status(notebook)
    if len(args) > 2 or args[0].lower() not in MODES:
        raise user_error(
            f"Unexpected arguments: %agent cassette {' '.join(args)}.",
            f"Usage: {USAGE}.",
            "invalid_option",
        )
    switch.set(args[0], args[1] if len(args) > 1 else None)
    return switch.status(notebook)
