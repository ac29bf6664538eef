"""The ``%%agent`` cell magic and the ``%agent`` line commands.

``%%agent`` blocks until the run ends (so Run All and nbval see the result) while the cell
updates live; Ctrl-C / ■ cancels the run; a failed run raises, after showing its error and hint,
so that Run All stops there. Defaults are configurable (``c.AgentMagics.model = ...`` in an
IPython profile or ``%config AgentMagics.auto_approve = True``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, CaselessStrEnum, Int, List, Unicode

from .front_end import no_front_end, running_cell_id
from .help_text import HELP
from .interpolate import interpolate
from .notebook_path import former_sessions, session_file
from .runner import run_blocking
from .state import KernelState, RunSpent, kernel_hooks, kernel_plugins
from .tools import GROUPS, kernel_tools
from .user_error import user_error
from .widget_renderer import WidgetRenderer, pump_comm_messages, widgets_available

# The agent core (pydantic models, providers) loads at the first %%agent, so that
# `%load_ext ipyagent` stays fast; these names are for the type checker only.
if TYPE_CHECKING:
    from ..agentlib.agent import Agent
    from ..agentlib.messages import TextBlock
    from ..agentlib.model import Provider
    from ..agentlib.result import RunResult
    from ..agentlib.sessions import Session
    from .fix_command import FailedCell
    from .runner import Renderer


__all__ = ["AgentMagics", "WithSubagentFiles", "protected_files"]


def __getattr__(name: str) -> Any:
    # AgentRunFailed lives in the core (ipyagent.AgentRunFailed); loaded on first use so that
    # %load_ext stays free of pydantic.
    if name == "AgentRunFailed":
        from ..agentlib.errors import AgentRunFailed

        return AgentRunFailed
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def protected_files(
    *, sessions: Iterable[Path], cassette: Path | None, notebook: Path | None, headless: bool
) -> dict[Path, str]:
    """The files no tool of this kernel may write, each with what it is (the model is told).

    A conversation's session file is appended to through an open handle: a file written over
    it would take the place of its name while later turns go to the old, unlinked one. The
    cassette is being recorded or replayed; a headless run's notebook is being executed."""
    found = dict.fromkeys(
        sessions,
        "the file a conversation of this kernel is saved in; writing it would lose the turns that follow",
    )
    if cassette is not None:
        found[cassette] = "the cassette this kernel records to or replays from"
    if headless and notebook is not None:
        found[notebook] = "the notebook this headless run executes; propose changes with insert_cell instead"
    return found


class WithSubagentFiles(Mapping[Path, str]):
    """``found`` and, read live, the files the sub-agents of ``sessions`` are saved in: they
    appear while a run goes on (``analysis.agent.delegate-1.jsonl``), each written through its
    own open handle while its sub-agent works."""

    WHY = "the file a sub-agent of this kernel's conversation is saved in; writing it would lose its turns"

    def __init__(self, found: Mapping[Path, str], sessions: Iterable[Session]) -> None:
        self.found = dict(found)
        self.sessions = list(sessions)

    def _current(self) -> dict[Path, str]:
        children = {
            session.path.with_name(record["file"]): self.WHY
            for session in self.sessions
            for record in session.state.subagents
        }
        return {**children, **self.found}

    def __getitem__(self, path: Path) -> str:
        return self._current()[path]

    def __iter__(self) -> Iterator[Path]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())


@magics_class
class AgentMagics(Magics):
    """``%%agent`` and ``%agent``. Configure defaults with ``c.AgentMagics.<name>``."""

    model = Unicode(None, allow_none=True, help="Default model id, e.g. 'openai/gpt-4.1'.").tag(config=True)
    utility_model = Unicode(
        None,
        allow_none=True,
        help="Model id for side calls (compaction's and the summaries plugin's summaries); default: the "
        "model's endpoint's small model where one is known (openai/gpt-4.1-mini, ...), else the model.",
    ).tag(config=True)
    auto_approve = Bool(False, help="Run tools that change things without asking.").tag(config=True)
    max_turns = Int(30, help="Model calls allowed in one %%agent run.").tag(config=True)
    budget = Unicode(
        None, allow_none=True, help="Caps on each run, e.g. 'tokens=50k,cost=0.50,time=5m'."
    ).tag(config=True)
    context = Unicode(
        "auto",
        help="What each prompt carries about the notebook: cell, outline, variables, error, all or none; "
        "auto: all, except for the embedded local model (none).",
    ).tag(config=True)
    context_budget = Int(1_000, help="Tokens the notebook's context may take in a prompt.").tag(config=True)
    conversation_budget = Unicode(
        None, allow_none=True, help="Caps on each conversation's total, e.g. 'tokens=2M,cost=5,time=1h'."
    ).tag(config=True)
    session_dir = Unicode(
        None, allow_none=True, help="Folder for conversation files (default: beside the notebook)."
    ).tag(config=True)
    thinking = CaselessStrEnum(
        ["none", "low", "medium", "high"], None, allow_none=True, help="Reasoning effort."
    ).tag(config=True)
    tools = Unicode(",".join(GROUPS), help="Tool groups available by default.").tag(config=True)
    code_in_cells = Bool(
        False,
        help="The agent's code runs as new cells of the notebook (run_new_cell), not hidden in the run.",
    ).tag(config=True)
    undo_memory = Unicode(
        "",
        help="Memory one run's undo checkpoint of the variables may take, e.g. '4GB' ('0': no cap; "
        "default: $IPYAGENT_UNDO_MEMORY, else the smaller of 2 GiB and a quarter of the free memory).",
    ).tag(config=True)
    delegate_depth = Int(
        1,
        help="With --tools ...,delegate: levels of sub-agents below a cell's agent "
        "(1: they delegate no further).",
    ).tag(config=True)
    delegate_max_turns = Int(
        0, help="With --tools ...,delegate: model calls a sub-agent may make (0: the cell's --max-turns)."
    ).tag(config=True)
    plugins = List(
        Unicode(), [], help="Plugins every run uses unless --plugins says otherwise: memory, summaries."
    ).tag(config=True)
    show_thinking = Bool(True, help="Show the model's thinking in the cell.").tag(config=True)
    widgets = Bool(True, help="Show runs as live widgets (else as plain updating outputs).").tag(config=True)

    def __init__(self, shell: Any, *, state: KernelState) -> None:
        super().__init__(shell)
        self.state = state

    # -- %%agent ---------------------------------------------------------------------------------

    @magic_arguments()
    @argument("-m", "--model", default=None, help="Model id '<endpoint>/<model>' for this run.")
    @argument("-s", "--session", default=None, help="Conversation name (a file beside the notebook).")
    @argument("--new", action="store_true", help="Start a fresh conversation.")
    @argument("-y", "--yes", action="store_true", help="Run tools that change things without asking.")
    @argument("--read-only", action="store_true", help="Refuse every tool that changes something.")
    @argument(
        "--tools",
        default=None,
        help="Tool groups (python,notebook,files; shell and delegate when named) and your own "
        "functions' names.",
    )
    @argument(
        "--cells",
        action="store_true",
        default=None,
        help="The agent's code runs as new cells of the notebook, not hidden in the run.",
    )
    @argument("--max-turns", type=int, default=None, help="Model calls allowed in this run.")
    @argument("--budget", default=None, help="Caps on this run: tokens=50k,cost=0.50,time=5m.")
    @argument("--context", default=None, help="Notebook context sent: cell,outline,variables,error or none.")
    @argument("--thinking", default=None, choices=["none", "low", "medium", "high"], help="Reasoning effort.")
    @argument("-o", "--output", default=None, help="Store the result object in this variable.")
    @argument(
        "--output-type",
        default=None,
        help="Validate the answer into this type of the namespace (Ticket, list[Ticket], int).",
    )
    @argument("--plugins", default=None, help="Plugins for this run: memory,summaries or none.")
    @argument("--quiet", action="store_true", help="Show nothing while the run is in progress.")
    @argument("--verify", action="store_true", help="Ask the model once to compute untraced numbers.")
    @argument(
        "command",
        nargs="*",
        help="(line form) model, models, session, usage, compact, reset, fix, undo, history, memory, "
        "summaries, help",
    )
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> Any:
        """Talk to the agent: ``%%agent`` runs the cell body as a prompt; ``%agent help`` lists
        the line commands."""
        if cell is None:
            return self._command(line)
        args = parse_argstring(self.agent, line)
        if args.command:
            raise user_error(
                f"Unexpected words after %%agent: {' '.join(args.command)!r}.",
                "Options start with '-' (see %%agent?); the prompt goes in the cell body.",
            )
        prompt = interpolate(cell, self.shell.user_ns).strip() if self.shell else cell.strip()
        if not prompt:
            raise user_error("The %%agent cell is empty.", "Write your request in the cell body.")
        output_type = self._output_type(args.output_type)
        agent = self._agent(args.session, new=args.new)
        cell_id = running_cell_id(self.shell)
        self._configure(agent, args, cell_id=cell_id)
        result, interrupted = self._run(
            agent, prompt, args, cell_id=cell_id, raw_cell=f"%%agent {line}\n{cell}", output_type=output_type
        )
        if args.output and result is not None and self.shell is not None:
            self.shell.user_ns[args.output] = result
        return self._conclude(result, interrupted)

    def _run(
        self,
        agent: Agent,
        prompt: str,
        args: Any,
        *,
        cell_id: str | None,
        raw_cell: str,
        context: str = "all",
        output_type: Any = None,
    ) -> tuple[RunResult | None, bool]:
        """Run ``prompt`` in the cell ``raw_cell`` until the run ends, shown as ``args`` ask;
        ``context``: the notebook context sent by default (``auto``'s choice for a remote model);
        ``output_type``: the type the answer is validated into (None: text)."""
        inside = self.state.cells.inside_cell(raw_cell)
        with pump_comm_messages(self.shell) as poll, inside:
            attachments = self._context(agent, args.context, cell_id=cell_id, auto=context, prompt=prompt)
            from .mentions import compute_first

            first = None if output_type else compute_first(attachments, [t.name for t in agent.tools])
            renderer = self._renderer(agent, args.quiet, poll)
            return run_blocking(
                agent,
                prompt,
                renderer=renderer,
                loop=self.state.loop,
                main=self.state.main,
                poll=poll,
                attachments=attachments,
                output_type=output_type,
                tool_choice=first,
            )

    def _output_type(self, name: str | None) -> Any:
        """The type ``--output-type`` names, evaluated in the user's namespace (None: text)."""
        from .interpolate import evaluate_type

        return evaluate_type(name, self.shell.user_ns if self.shell is not None else {})

    def _configure(self, agent: Agent, args: Any, *, cell_id: str | None = None) -> None:
        """Settle the run's model, permissions and tools; ``cell_id``: the notebook cell the run
        is in (a ``%%agent`` cell; a chat is in none)."""
        from .cassettes import replay_mode

        model = replay_mode().wrap(self._resolve_model(args.model), self.state.notebook)
        if model is not None:
            agent.model = model
        # A name of the namespace may stand for a provider object, as with -m.
        agent.utility_model = (
            self._resolve_model(self.utility_model, default=False) if self.utility_model else None
        )
        agent.auto_approve = bool(args.yes or self.auto_approve)
        self.state.variables.limit = self.undo_memory
        agent.can_write = not args.read_only
        agent.verify = bool(getattr(args, "verify", False))
        agent.max_turns = args.max_turns or self.max_turns
        from ..agentlib.budget import Budget

        agent.budget = Budget.of(args.budget or self.budget)
        agent.conversation_budget = Budget.of(self.conversation_budget)
        thinking = args.thinking or self.thinking
        agent.settings = agent.settings.model_copy(update={"thinking": thinking})
        groups = [g.strip() for g in (args.tools or self.tools).split(",") if g.strip()]
        agent.tools = []
        # A sub-agent's conversation is saved beside this one's (analysis.agent.delegate-1.jsonl).
        if "delegate" in groups:
            from ..agentlib.delegation import Delegation

            agent.delegate = Delegation(
                max_depth=self.delegate_depth, max_turns=self.delegate_max_turns or None
            )
        else:
            agent.delegate = False
        from .notebook_path import runs_headless

        open_sessions = [
            a.session.path for a in (*self.state.agents.values(), agent) if a.session is not None
        ]
        replay = replay_mode()
        found = protected_files(
            sessions=open_sessions,
            cassette=replay.cassette_path(self.state.notebook) if replay.active else None,
            notebook=self.state.notebook,
            headless=runs_headless(),
        )
        sessions = [a.session for a in (*self.state.agents.values(), agent) if a.session is not None]
        protected = WithSubagentFiles(found, sessions)
        for t in kernel_tools(
            groups,
            shell=self.shell,
            main=self.state.main,
            workspace=self.state.workspace,
            notebook=self.state.notebook,
            history=self.state.history,
            namespace=self.shell.user_ns if self.shell is not None else None,
            protected=protected,
            live=self.state.live,
            cell_id=cell_id,
            session=agent.session.path.name if agent.session is not None else None,
            cells=self.state.cells,
            code_in_cells=bool(getattr(args, "cells", None) or self.code_in_cells),
            variables=self.state.variables,
        ):
            agent.add_tool(t)
        from .plugin_command import configure_plugins, plugin_names

        names = plugin_names(getattr(args, "plugins", None), self.plugins)
        configure_plugins(agent, names, self.state, replaying=replay.active, session_dir=self.session_dir)
        if self._someone_may_answer(args):
            from ..agentlib.ask_tool import ask_user_tool

            agent.add_tool(ask_user_tool())
        model_id = agent.provider.model_id  # resolves now: a missing key fails before the run
        if model_id not in self.state.models_used:
            self.state.models_used.append(model_id)
        self.state.say_once(f"model:{model_id}", f"ipyagent: using {model_id} (change with %agent model ID)")

    def _resolve_model(self, requested: str | None, *, default: bool = True) -> str | Provider | None:
        from ..agentlib.model import Provider

        value = requested or self.state.model or self.model or os.environ.get("IPYAGENT_MODEL")
        if value is None and default:
            from .cassettes import replay_mode

            if not replay_mode().active:  # a replay names its recorded model itself
                from ..agentlib.endpoints import default_model_id

                value = default_model_id()  # said once by _configure: "using <model>"
        if isinstance(value, str) and self.shell is not None and value.isidentifier():
            candidate = self.shell.user_ns.get(value)
            if isinstance(candidate, Provider):  # `-m my_scripted_model`: a Provider object
                return candidate
        return value

    def _agent(self, session: str | None, *, new: bool) -> Agent:
        """The agent of conversation ``session``, opened from its file beside the notebook."""
        from ..agentlib.agent import Agent
        from ..agentlib.hooks import Hooks
        from ..agentlib.plugins import Plugins

        name = session if session is not None else self.state.session
        agent = self.state.agents.get(name)
        if agent is None:
            from .cassettes import replay_mode

            notebook = self.state.notebook
            path = session_file(notebook, name, session_dir=self.session_dir)
            # A recorded run starts from an empty conversation: a resumed one would not match.
            replaying = replay_mode().active
            if notebook is None and not self.session_dir and not replaying:
                self.state.say_once(
                    "where",
                    "ipyagent: this kernel does not know its notebook; "
                    f"conversations are saved in {path.parent}",
                )
            if not replaying and not path.exists():
                self._mention_former(name, path)
            agent = Agent(
                # The model is settled by _configure (-m, %agent model, config, or the default).
                model=self._resolve_model(None, default=False),
                session=None if replaying else path,
                notebook=str(notebook) if notebook else None,
                workspace=self.state.workspace,
                # Its own hooks, which include the kernel's: those apply to every conversation.
                hooks=Hooks(include=[kernel_hooks()]),
                plugins=Plugins(include=[kernel_plugins()]),  # --plugins adds the built-in ones
                mcp=self.state.mcp,
            )
            self.state.agents[name] = agent
        if new:
            agent.reset()
        return agent

    def _context(
        self, agent: Agent, requested: str | None, *, cell_id: str | None, auto: str = "all", prompt: str = ""
    ) -> list[TextBlock]:
        """The notebook's context for a prompt (see :mod:`.context`), as blocks to attach, and the
        variables ``prompt`` mentions (see :mod:`.mentions`); ``auto``: the parts sent to a remote
        model when the run and the configuration say auto."""
        from ..agentlib.messages import TextBlock
        from .cassettes import replay_mode
        from .context import gather_context, parse_parts

        wanted = requested if requested is not None else self.context
        local = agent.provider.model_id.startswith("local/")
        bare = False
        if wanted.strip().lower() == "auto":
            # The embedded 1.5B model, with its 8k window, does worse with it: asked "what is a
            # Jupyter kernel?" it described a DataFrame of the context instead (notebooks/); it is
            # given the data its prompt names instead. A recording must replay in another kernel,
            # whose variables differ: neither there.
            bare = local and not replay_mode().active
            wanted = "none" if local or replay_mode().active else auto
        parts = parse_parts(wanted)
        context = gather_context(self.state, parts=parts, cell_id=cell_id, budget=self.context_budget)
        blocks = [TextBlock(text=context.text, attached="notebook context")] if context is not None else []
        if prompt and self.shell is not None:
            from .mentions import mentioned_variables

            hidden = getattr(self.shell, "user_ns_hidden", {})
            blocks += mentioned_variables(prompt, self.shell.user_ns, bare=bare, hidden=hidden)
        return blocks

    def _someone_may_answer(self, args: Any) -> bool:
        """Whether a view will show the model's questions: a widget in a front end. A headless
        run (nbval, `python -m ipyagent run`), a --quiet cell or terminal IPython is not offered
        ``ask_user``, a question nobody could answer; nor is a recording or a replay, which must
        offer the same tools in a page and headless."""
        from .cassettes import replay_mode

        in_kernel = self.shell is not None and getattr(self.shell, "kernel", None) is not None
        return (
            in_kernel
            and not replay_mode().active
            and not getattr(args, "quiet", False)
            and self.widgets
            and widgets_available()
            and no_front_end(self.shell) is None
        )

    def _renderer(self, agent: Agent, quiet: bool, poll: Callable[[], None] | None) -> Renderer:
        from .render import DisplayRenderer, QuietRenderer, TerminalRenderer

        if quiet:
            return QuietRenderer()
        if self.shell is not None and getattr(self.shell, "kernel", None) is not None:
            if self.widgets and widgets_available():
                return WidgetRenderer(agent, poll=poll, no_front_end=no_front_end(self.shell))
            return DisplayRenderer(show_thinking=self.show_thinking)
        return TerminalRenderer(show_thinking=self.show_thinking)

    def _conclude(self, result: RunResult | None, interrupted: bool) -> None:
        if result is not None:
            model = next((m.model for m in reversed(result.messages) if m.model), "")
            self.state.runs.append(RunSpent(model=model, status=result.status, usage=result.usage))
            self.state.variables.finish(result.run_id)  # what the run did not change is dropped
        if interrupted or result is None or result.status == "cancelled":
            print("Run cancelled; the conversation is kept and the next %%agent continues it.")
            if interrupted:
                raise KeyboardInterrupt
            return
        if result.status == "failed":
            result.raise_for_status()

    # -- %agent ----------------------------------------------------------------------------------

    def _command(self, line: str) -> Any:
        words = line.split()
        command, rest = (words[0], words[1:]) if words else ("help", [])
        handler = getattr(self, f"_cmd_{command}", None)
        if handler is None:
            raise user_error(f"Unknown command %agent {command}.", "See %agent help.", "unknown_command")
        return handler(rest)

    def _cmd_chat(self, rest: list[str]) -> Any:
        """A chat widget on the current conversation, with the kernel's tools."""
        if not widgets_available():
            raise user_error(
                "The chat widget needs anywidget and the bundled front end.",
                "pip install anywidget (it comes with ipyagent); then run %agent chat again.",
                "widgets_unavailable",
            )
        from ..controllers import ChatWidget

        args = parse_argstring(self.agent, " ".join(rest))
        agent = self._agent(args.session, new=args.new)
        self._configure(agent, args)
        namespace = self.shell.user_ns if self.shell is not None else {}

        def mentions(text: str) -> list[TextBlock]:
            from .mentions import mentioned_variables

            return [*self._context(agent, args.context, cell_id=None), *mentioned_variables(text, namespace)]

        return ChatWidget(
            agent, loop=self.state.loop, wait_for=self.state.main.serve_until, mentions=mentions
        )

    def _cmd_replay(self, rest: list[str]) -> None:
        """The old spelling of ``%agent cassette``, kept for one release."""
        print(
            "`%agent replay` is now `%agent cassette`; the old name goes away in the next release.",
            file=sys.stderr,
        )
        self._cmd_cassette(rest)

    def _cmd_cassette(self, rest: list[str]) -> None:
        from .cassettes import command

        print(command(rest, notebook=self.state.notebook))
        if rest:  # a new mode: the next %%agent starts a fresh conversation, as in a new kernel
            for agent in self.state.agents.values():
                agent.close()
            self.state.agents.clear()

    def _cmd_mcp(self, rest: list[str]) -> None:
        from .mcp_command import mcp_command

        print(mcp_command(self.state.mcp, rest))

    def _cmd_memory(self, rest: list[str]) -> None:
        from .plugin_command import memory_command

        print(memory_command(self.state, rest))

    def _cmd_summaries(self, rest: list[str]) -> None:
        from .plugin_command import summaries_command

        print(summaries_command(self.state, rest, session_dir=self.session_dir))

    def _cmd_help(self, rest: list[str]) -> None:
        print(HELP)

    def _cmd_model(self, rest: list[str]) -> None:
        from ..agentlib.agent import Agent
        from ..agentlib.model import Provider

        if rest:
            from .cassettes import replay_mode

            model = self._resolve_model(rest[0])
            if replay_mode().mode != "replay":  # a replay needs no key or local model
                Agent(model=model).provider  # noqa: B018 - resolve now: fail here, not in the next cell
            self.state.model = model
            for agent in self.state.agents.values():
                agent.model = model
        current = self._resolve_model(None, default=False)
        name = current.model_id if isinstance(current, Provider) else current
        print(f"model: {name or '(default)'}")

    def _cmd_models(self, rest: list[str]) -> None:
        from ..agentlib.endpoints import endpoints

        for name, endpoint in sorted(endpoints().items()):
            names = endpoint.key_envs()
            found = [n for n in names if os.environ.get(n)]
            if endpoint.api_key:
                status = "key in config file"
            elif not names or not endpoint.key_required:
                status = "no key needed"
            else:
                status = f"{found[0]} set" if found else f"{' or '.join(names)} not set"
            print(f"{name:<12} {endpoint.kind:<10} {status}")

    def _cmd_session(self, rest: list[str]) -> None:
        notebook = self.state.notebook
        if not rest or rest[0] == "list":
            current = self.state.session
            folder = session_file(notebook, None, session_dir=self.session_dir).parent
            stem = notebook.stem if notebook else "ipyagent"
            on_disk = {
                p.name[len(stem) + 1 : -len(".agent.jsonl")] or None
                for p in folder.glob(f"{stem}.*agent.jsonl")
            }
            for name in sorted(on_disk | set(self.state.agents) | {current}, key=lambda n: n or ""):
                marker = "*" if name == current else " "
                where = session_file(notebook, name, session_dir=self.session_dir)
                print(f"{marker} {name or '(default)'}  {where}")
            return
        if rest[0] == "new":
            self._agent(None, new=True)
            print("Started a new conversation.")
            return
        path = session_file(notebook, rest[0], session_dir=self.session_dir)  # validates the name
        self.state.session = rest[0]
        print(f"Using session {rest[0]!r} ({path}).")

    def _mention_former(self, name: str | None, path: Path) -> None:
        """Say so when a new conversation starts while one saved under the notebook's former
        name is beside it: the notebook was probably renamed."""
        notebook = self.state.notebook
        if name is not None or notebook is None:
            return
        for file, former in former_sessions(notebook, path.parent):
            self.state.say_once(
                f"former:{file}",
                f"ipyagent: {file.name} holds a conversation of {former}, which no longer exists "
                f"(was this notebook renamed?). {notebook.name} has no conversation of its own yet. "
                f"To continue that one here: %agent session {file.name}",
            )

    def _current(self) -> Agent | None:
        """The current conversation: the one in use, else the one saved beside the notebook (a
        restarted kernel opens it at the first command that needs it)."""
        from .cassettes import replay_mode

        name = self.state.session
        agent = self.state.agents.get(name)
        if agent is not None or replay_mode().active:  # a replay starts from an empty conversation
            return agent
        path = session_file(self.state.notebook, name, session_dir=self.session_dir)
        if path.exists():
            return self._agent(name, new=False)
        self._mention_former(name, path)
        return None

    def _cmd_usage(self, rest: list[str]) -> None:
        agent = self._current()
        if agent is None:
            print("No conversation yet.")
            return
        print(f"conversation: {agent.usage} over {agent.usage.requests} request(s)")
        if agent.utility_usage.requests:
            from ..agentlib.errors import UserError

            side = agent.utility_usage
            try:
                on = f", on {agent.utility_provider.model_id}"
            except UserError:  # a resumed conversation whose model cannot be reached now: tokens only
                on = ""
            print(f"  of which side calls (summaries{on}): {side} over {side.requests} request(s)")
        print(f"context: {agent.context}")
        from ..agentlib.usage import cache_summary

        if cache := cache_summary(agent.usage):
            print(cache)
        caps = [
            f"{scope} {b}"
            for scope, b in (("run", agent.budget), ("conversation", agent.conversation_budget))
            if b
        ]
        if caps:
            print(f"budget: {'; '.join(caps)}")
        if agent.conversation_budget and agent.conversation_budget.seconds is not None:
            print(f"time: {agent.seconds:.1f} s over the conversation's runs")
        if agent.usage.requests and agent.usage.cost is None:
            print(
                "cost: no price is known for this conversation's model, so only tokens are shown "
                '(add one to ~/.config/ipyagent/config.toml: [prices."MODEL"] input = ..., output = ...)'
            )
        runs = self.state.runs
        if runs:
            print(f"runs in this kernel ({len(runs)}):")
            for number, run in enumerate(runs, 1):
                print(f"  {number:>3}. {run.status:<9} {run.model or '?'}: {run.usage}")
            from ..agentlib.usage import Usage

            total = sum((r.usage for r in runs), Usage())
            print(f"  total: {total}")

    def _cmd_history(self, rest: list[str]) -> None:
        agent = self._current()
        for message in agent.messages if agent else []:
            calls = ", ".join(c.name for c in message.tool_calls)
            text = message.text or (f"[results: {len(message.tool_results)}]" if message.tool_results else "")
            print(f"{message.role:>9}: {text[:200]}{' [calls: ' + calls + ']' if calls else ''}")

    def _cmd_reset(self, rest: list[str]) -> None:
        agent = self._current()
        if agent is not None:
            agent.reset()
        print("The conversation was reset.")

    def _cmd_undo(self, rest: list[str]) -> None:
        """Undo a run's changes to the live notebook and to the variables: the latest run, or
        ``RUN`` (see :mod:`.undo_command`)."""
        from .undo_command import undo_command

        print(undo_command(self.state, rest[0] if rest else None))

    def _cmd_fix(self, rest: list[str]) -> None:
        """Explain the last error and propose its fix as an edit of the failing cell
        (``%agent fix [CELL_ID] [options]``; see :mod:`.fix_command`)."""
        from .fix_command import find_failed_cell

        args = parse_argstring(self.agent, " ".join(rest))
        if len(args.command) > 1:
            raise user_error(
                f"%agent fix takes one cell id at most, not {' '.join(args.command)!r}.",
                "Run %agent fix for the last error, or %agent fix CELL_ID.",
            )
        failed = find_failed_cell(self.state, args.command[0] if args.command else None)
        agent = self._fix_agent()
        try:
            self._fix(agent, failed, args, rest)
        finally:
            agent.close()

    def _fix_agent(self) -> Agent:
        """A conversation of its own for a fix: not saved, and with no MCP servers, so that its
        tools are the fix's and nothing else (the edit it makes is not asked about); the kernel's
        hooks and policies apply as to every conversation."""
        from ..agentlib.agent import Agent
        from ..agentlib.hooks import Hooks

        notebook = self.state.notebook
        return Agent(
            model=self._resolve_model(None, default=False),
            session=None,
            notebook=str(notebook) if notebook else None,
            workspace=self.state.workspace,
            hooks=Hooks(include=[kernel_hooks()]),
            mcp=False,
        )

    def _fix(self, agent: Agent, failed: FailedCell, args: Any, rest: list[str]) -> None:
        from .fix_command import explanation, fix_prompt, fix_report, used_variables
        from .notebook_path import runs_headless
        from .tools.fix import FixProposal, fix_tools

        own_cell = running_cell_id(self.shell)
        self._configure(agent, args, cell_id=own_cell)
        proposals: list[FixProposal] = []
        agent.tools = []
        for name in agent.plugins.names:  # the fix's tools and nothing else: no plugin's
            agent.plugins.remove(name)
        for t in fix_tools(
            self.shell,
            self.state.main,
            self.state.notebook,
            cell_id=failed.edit_id,
            name=failed.name,
            source=failed.source,
            live=self.state.live if failed.live else None,
            history=self.state.history,
            own_cell_id=own_cell,
            session=agent.session.path.name if agent.session is not None else None,
            proposals=proposals,
        ):
            agent.add_tool(t)
        # The run's one change is itself a proposal, reviewed on the cell or shown here: no question.
        agent.auto_approve = True
        raw = f"%agent fix {' '.join(rest)}".rstrip()
        result, interrupted = self._run(
            agent,
            fix_prompt(failed, used_variables(failed.source, self.shell.user_ns if self.shell else {})),
            args,
            cell_id=own_cell,
            raw_cell=raw,
            context="outline,variables",
        )
        self._conclude(result, interrupted)
        if result is None or result.status == "cancelled":
            return
        headless = runs_headless() or no_front_end(self.shell) is not None
        report, proposal = fix_report(failed, proposals, headless=headless)
        if args.quiet and result is not None:
            # The explanation, which the run did not show: the page's Fix button shows it on the
            # fix's review, where the report would only repeat what the review says.
            print(explanation(result))
            if proposals and proposals[-1].live:
                return
        print(report)
        if proposal is not None and self.shell is not None:
            self.shell.set_next_input(proposal, replace=False)

    def _cmd_compact(self, rest: list[str]) -> None:
        agent = self._current()
        if agent is None:
            print("Nothing to compact.")
            return
        future = self.state.loop.submit(agent.compact(focus=" ".join(rest)))
        print(future.result())
