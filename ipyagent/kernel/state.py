"""What the extension keeps for the life of a kernel: the worker loop, the main-thread bridge,
cell history, the live-notebook channel, and one agent per conversation."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .history import History
from .live_notebook import LiveNotebook
from .notebook_path import find_notebook
from .runner import MainThread
from .variable_checkpoint import VariableCheckpoints

if TYPE_CHECKING:  # the core loads at the first %%agent, not at %load_ext
    from ..agentlib.agent import Agent
    from ..agentlib.background import BackgroundLoop
    from ..agentlib.hooks import Hooks
    from ..agentlib.mcp_servers import McpServers
    from ..agentlib.model import Provider
    from ..agentlib.plugins import Plugin, Plugins
    from ..agentlib.usage import Usage
    from .tools._cell_runs import CellRunner

__all__ = ["KernelState", "RunSpent", "kernel_hooks", "kernel_plugins"]

_hooks: list[Hooks] = []
_plugins: list[Plugins] = []


def kernel_hooks() -> Hooks:
    """The hooks of every ``%%agent`` conversation in this kernel (``ipyagent.kernel.hooks``)."""
    if not _hooks:
        from ..agentlib.hooks import Hooks

        _hooks.append(Hooks())
    return _hooks[0]


def kernel_plugins() -> Plugins:
    """The plugins of every ``%%agent`` conversation in this kernel (``ipyagent.kernel.plugins``)."""
    if not _plugins:
        from ..agentlib.plugins import Plugins

        _plugins.append(Plugins())
    return _plugins[0]


@dataclass(frozen=True)
class RunSpent:
    """One run's line in ``%agent usage``."""

    model: str
    status: str
    usage: Usage


@dataclass
class KernelState:
    shell: Any
    main: MainThread = field(default_factory=MainThread)
    history: History = field(default_factory=History)
    agents: dict[str | None, Agent] = field(default_factory=dict)
    #: Set by ``%agent model``: wins over configuration for the rest of the kernel's life.
    model: str | Provider | None = None
    session: str | None = None
    said: set[str] = field(default_factory=set)
    #: The models this kernel's runs used, in the order first used (``python -m ipyagent run``
    #: reports them).
    models_used: list[str] = field(default_factory=list)
    #: What each ``%%agent`` run of this kernel spent, in order (``%agent usage`` lists them).
    runs: list[RunSpent] = field(default_factory=list)
    #: The comms with the pages showing this kernel's notebook (opened by ``%load_ext``).
    live: LiveNotebook = field(init=False)
    #: What each run's code changed in the namespace, for an undo of the run.
    variables: VariableCheckpoints = field(init=False)
    _cells: CellRunner | None = field(default=None, init=False, repr=False)
    #: The MCP servers of every conversation of this kernel (``%agent mcp``), made at first use.
    _mcp: McpServers | None = None
    #: The built-in plugins (``--plugins memory,summaries``), made at first use.
    _plugins: dict[str, Plugin] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.variables = VariableCheckpoints(self.shell)
        self.live = LiveNotebook(self.shell, on_request={"undo_variables": self._undo_variables})

    def _undo_variables(self, params: dict[str, Any]) -> dict[str, Any]:
        """The page's ``undo_variables``: put back what run ``params["run"]``'s code changed."""
        run = params.get("run")
        return self.variables.undo(run if isinstance(run, str) and run else None).as_json()

    @property
    def cells(self) -> CellRunner:
        """Runs the notebook's cells for the agent (``run_cell``); made at the first run."""
        if self._cells is None:
            from .tools._cell_runs import CellRunner

            self._cells = CellRunner(self.shell, self.main, self.variables)
        return self._cells

    @property
    def loop(self) -> BackgroundLoop:
        """The worker loop the runs use (the core's shared one; started on first use)."""
        from ..agentlib.background import shared_loop

        return shared_loop()

    @property
    def notebook(self) -> Path | None:
        return find_notebook(self.shell)

    @property
    def workspace(self) -> Path:
        notebook = self.notebook
        return notebook.parent if notebook is not None else Path.cwd()

    @property
    def mcp(self) -> McpServers:
        """The kernel's MCP servers: the config file's, the notebook folder's ``.mcp.json`` and
        those added with ``%agent mcp add``; started at the first run that enables them."""
        if self._mcp is None:
            from ..agentlib.mcp_servers import McpServers

            self._mcp = McpServers(workspace=self.workspace)
        return self._mcp

    def plugin(self, name: str, *, session_dir: str | None = None) -> Plugin:
        """The kernel's built-in plugin ``name`` (``memory``: the notebook folder's notes;
        ``summaries``: the notebook's, beside its conversations, in ``session_dir`` when set),
        made again when the notebook or its folder changed."""
        from .notebook_path import session_file

        if name == "memory":
            from ..agentlib.memory import Memory

            memory = Memory(self.workspace)
            known = self._plugins.get(name)
            if not isinstance(known, Memory) or known.folder != memory.folder:
                self._plugins[name] = memory
        else:
            from ..agentlib.summaries import Summaries

            notebook = self.notebook
            folder = session_file(notebook, None, session_dir=session_dir).parent
            path = folder / f"{notebook.stem if notebook is not None else 'ipyagent'}.summaries.jsonl"
            known = self._plugins.get(name)
            if not isinstance(known, Summaries) or known.path != path:
                self._plugins[name] = Summaries(path)
        return self._plugins[name]

    def say_once(self, key: str, message: str) -> None:
        """Print a notice the first time only (which model is used, where sessions go, ...)."""
        if key not in self.said:
            self.said.add(key)
            print(message)

    def close(self) -> None:
        self.live.close()
        for agent in self.agents.values():
            agent.cancel()
        self.agents.clear()
        if self._mcp is not None:
            self._mcp.close()
        self.loop.stop()
