"""Tools on the live kernel: run Python in the user's namespace, look at variables, read history.

Everything that touches the namespace runs on the kernel's main thread (user code, matplotlib
and display hooks expect it). What the model reads is text, size-capped with the cap stated;
rich outputs (figures, HTML tables) go to the user as display payloads.

``run_python`` runs in the user's namespace, in the kernel's own process: it is outside the OS
sandbox (:mod:`ipyagent.agentlib.sandbox`) by design — its point is to change the user's live
variables, which a confined child process cannot reach. It changes things, so it asks for
permission; a command that only needs the system belongs in ``shell``, which is confined.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import itertools
import linecache
import re
import signal
import sys
import threading
import traceback
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...agentlib.messages import ImageBlock
from ...agentlib.tools import RunContext, Tool, ToolOutput, tool
from ..history import History
from ..runner import MainThread
from .figures import describe_figure, figure_image

if TYPE_CHECKING:
    from ..variable_checkpoint import VariableCheckpoints
    from ._cell_outputs import CellOutputs

__all__ = ["History", "execute", "format_history", "python_tools"]

#: Characters of each output section (stdout, stderr, result, error) the model reads.
SECTION_CAP = 8_000
_counter = itertools.count(1)


def cap(text: str, limit: int = SECTION_CAP) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… (output truncated: {limit:,} of {len(text):,} characters shown)"


def execute(
    shell: Any,
    code: str,
    *,
    sink: CellOutputs | None = None,
    filename: str | None = None,
    execution_count: int | None = None,
    caller_interrupted: Callable[[], bool] = lambda: False,
) -> ToolOutput:
    """Run ``code`` in ``shell.user_ns`` like a cell: the last expression's value is the result.

    With a ``sink`` (``run_cell``), every output also goes to it as it comes, the result with
    ``execution_count``; the caller then owns the user's history (``In``/``Out``). An interrupt
    while ``caller_interrupted()`` says so is the caller's own (a timeout, a stopped run): the
    code's error, reported as such, not the user's Ctrl-C."""
    from IPython.utils.capture import capture_output

    from ._cell_outputs import forwarding_capture

    filename = filename or f"<agent-{next(_counter)}>"
    try:
        source = shell.transform_cell(code)  # %magics and !shell lines become Python
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        if sink is not None:
            sink.error("SyntaxError", str(exc), [f"SyntaxError: {exc}"])
        return ToolOutput(text=f"[error]\nSyntaxError: {exc}", is_error=True)
    # Register the source so tracebacks can quote the agent's lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    figures_before = _figure_numbers()
    value: Any = None
    error: str | None = None
    failure: BaseException | None = None
    capturing = (
        forwarding_capture(shell, sink)
        if sink is not None
        else capture_output(stdout=True, stderr=True, display=True)
    )
    with _sigint_watch() as interrupted, capturing as captured:
        try:
            exec(compile(tree, filename, "exec"), shell.user_ns)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), filename, "eval"), shell.user_ns)
        except (Exception, SystemExit) as exc:  # sys.exit() in a script's main() must not end the run
            error, failure = _format_error(exc, filename), exc
        except KeyboardInterrupt as exc:
            if interrupted() and not caller_interrupted():  # the user's Ctrl-C / ■: the run stops
                raise
            error, failure = _format_error(exc, filename), exc  # the code raised it: an error like any other
    sections: list[str] = []
    display: list[dict[str, Any]] = []
    images: list[ImageBlock] = []
    if captured.stdout:
        sections.append(f"[stdout]\n{cap(captured.stdout.rstrip())}")
    if captured.stderr:
        sections.append(f"[stderr]\n{cap(captured.stderr.rstrip())}")
    for output in captured.outputs:
        sections.append(f"[displayed]\n{_describe_bundle(output.data)}")
        display.append(dict(output.data))
        png = output.data.get("image/png")
        if isinstance(png, str):  # an image shown as it ran (plt.show()): a vision model sees it
            images.append(ImageBlock(media_type="image/png", data=png.replace("\n", "")))
    for bundle, description, image in _new_figures(shell, figures_before):
        sections.append(f"[displayed]\n(shown to the user: {description})")
        display.append(bundle)
        if sink is not None:
            sink.display(bundle, {})
        if image is not None:
            images.append(image)
    if value is not None:
        data, metadata = shell.display_formatter.format(value)
        sections.append(f"[result]\n{cap(data.get('text/plain', repr(value)))}")
        if sink is not None:
            sink.result(data, metadata, execution_count or 0)
        if execution_count is not None:  # as a cell's result: Out[n], _, __, ___
            with contextlib.suppress(Exception):
                shell.displayhook.update_user_ns(value)
        elif set(data) - {"text/plain"}:
            display.append(data)
    if error is not None:
        sections.append(
            f"[error]\n{cap(error)}{_loaded_already(failure, tree, source, filename, shell.user_ns)}"
        )
        if sink is not None and failure is not None:
            sink.error(type(failure).__name__, str(failure), error.splitlines())
    text = "\n\n".join(sections) or "(ran without output)"
    return ToolOutput(text=text, display=display or None, is_error=error is not None, images=images or None)


@contextlib.contextmanager
def _sigint_watch() -> Iterator[Callable[[], bool]]:
    """Yields a function that says whether a SIGINT — the kernel's interrupt — arrived in the
    block, so that a real interrupt can be told from code raising ``KeyboardInterrupt`` itself.

    The SIGINT handler in place is wrapped, not replaced: it still runs (and raises). Where no
    Python handler can run (not the main thread, or SIGINT ignored), no interrupt can arrive as a
    ``KeyboardInterrupt`` either, and the function always says no.
    """
    seen = False
    current = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(current):
        yield lambda: False
        return
    previous: Callable[[int, Any], Any] = current

    def watching(signum: int, frame: Any) -> Any:
        nonlocal seen
        seen = True
        return previous(signum, frame)

    signal.signal(signal.SIGINT, watching)
    try:
        yield lambda: seen
    finally:
        if signal.getsignal(signal.SIGINT) is watching:  # unless the code installed its own
            signal.signal(signal.SIGINT, previous)


def _loaded_already(
    failure: BaseException | None, tree: ast.Module, source: str, filename: str, namespace: dict[str, Any]
) -> str:
    """A hint after a file that does not exist, when the code meant a variable of the namespace:
    one with the file's name (``pd.read_csv('penguins.csv')``) or one the code loads again
    (``df = pd.read_csv('wine.csv')`` with ``df`` loaded). Small models guess a file for a frame
    they were told is in memory (bench/data_tasks.py), then tell the user to fix the path; told
    which line to drop, they drop it."""
    if not isinstance(failure, FileNotFoundError) or not isinstance(failure.filename, str):
        return ""
    # The line of the agent's code that failed: the assignment it was, if it was one.
    lines = [f.lineno for f in traceback.extract_tb(failure.__traceback__) if f.filename == filename]
    failed = next((line for line in reversed(lines) if line is not None), -1)
    loads = {
        target.id: ast.get_source_segment(source, statement) or ""
        for statement in tree.body
        if isinstance(statement, ast.Assign) and statement.lineno <= failed <= (statement.end_lineno or 0)
        for target in statement.targets
        if isinstance(target, ast.Name)
    }
    for name in [Path(failure.filename).stem, *loads]:
        value = namespace.get(name)
        if value is None or name.startswith("_") or inspect.ismodule(value) or callable(value):
            continue
        shape = getattr(value, "shape", None)
        what = f"{type(value).__module__.split('.')[0]}.{type(value).__name__}" + (
            f" shape={tuple(shape)}" if isinstance(shape, tuple) else ""
        )
        line = loads.get(name, "")
        fix = f"remove the line `{line}` and use `{name}`" if line else f"use `{name}` by name"
        return f"\nHint: `{name}` is already loaded in this namespace ({what}): {fix}; read no file."
    return ""


def _format_error(exc: BaseException, filename: str) -> str:
    """The exception with only the frames of the agent's code and below it (not ours)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    lines = traceback.format_exception(type(exc), exc, tb)
    if len(lines) > 12:
        lines = [lines[0], "  …\n", *lines[-10:]]
    return "".join(lines).rstrip()


def _describe_bundle(data: dict[str, Any]) -> str:
    if "text/plain" in data:
        rich = sorted(set(data) - {"text/plain"})
        note = f" (also shown to the user as {', '.join(rich)})" if rich else ""
        return f"{cap(str(data['text/plain']), 2_000)}{note}"
    return f"(shown to the user as {', '.join(sorted(data))})"


def _figure_numbers() -> set[int]:
    plt = sys.modules.get("matplotlib.pyplot")
    return set(plt.get_fignums()) if plt is not None else set()


def _new_figures(shell: Any, before: set[int]) -> list[tuple[dict[str, Any], str, ImageBlock | None]]:
    """Figures the code left open, rendered and closed, as the inline backend would: each one's
    bundle for the user, description and image for the model."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    figures = []
    for number in sorted(set(plt.get_fignums()) - before):
        figure = plt.figure(number)
        data, _metadata = shell.display_formatter.format(figure)
        if "image/png" not in data:  # no inline backend (Agg, a terminal): render the PNG ourselves
            from IPython.core.pylabtools import print_figure

            png = print_figure(figure, "png", base64=True)  # type: ignore[no-untyped-call]
            if png is None:  # nothing drawn: IPython renders an empty figure to no image
                plt.close(figure)
                continue  # (a None in a display bundle is an invalid notebook output)
            data = {**data, "image/png": png}
        figures.append((data, describe_figure(figure), figure_image(figure)))
        plt.close(figure)
    return figures


# -- variables -----------------------------------------------------------------------------------

_HIDDEN = {"In", "Out", "exit", "quit", "get_ipython", "open"}


def user_variables(shell: Any) -> dict[str, Any]:
    hidden = getattr(shell, "user_ns_hidden", {})
    return {
        name: value
        for name, value in shell.user_ns.items()
        if not name.startswith("_")
        and name not in _HIDDEN
        and name not in hidden
        and not isinstance(value, types.ModuleType)
    }


_COLUMN = re.compile(r"""^\s*([A-Za-z_]\w*)\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*(['"])(.+?)\3\s*\])\s*$""")


def column_of(name: str, variables: dict[str, Any]) -> tuple[str, Any] | None:
    """``frame.column`` or ``frame["column"]`` as ``(label, the column)`` when ``frame`` is a
    variable with that column (a DataFrame); no code is evaluated."""
    match = _COLUMN.match(name)
    if match is None or match.group(1) not in variables:
        return None
    frame = variables[match.group(1)]
    key = match.group(2) or match.group(4)
    columns = getattr(frame, "columns", None)
    if columns is None or key not in columns:
        return None
    return f"{match.group(1)}[{key!r}]", frame[key]


def _type_name(value: Any) -> str:
    kind = type(value)
    if kind.__module__ == "builtins":
        return kind.__name__
    return f"{kind.__module__.split('.')[0]}.{kind.__name__}"


def _unrepresentable(value: Any, exc: Exception) -> str:
    return f"{_type_name(value)} (unrepresentable: {type(exc).__name__}: {str(exc)[:200]})"


def safe_repr(value: Any) -> str:
    """``repr(value)``, or what stopped it: user objects' ``__repr__`` may raise."""
    try:
        return repr(value)
    except Exception as exc:
        return f"<{_unrepresentable(value, exc)}>"


def summarize(value: Any, limit: int = 80) -> str:
    """One line about a value: its type and its shape, length or a clipped repr. A value whose
    ``repr``, ``shape`` or ``len`` raises is said to be unrepresentable, with the error."""
    try:
        return _summarize(value, limit)
    except Exception as exc:
        return _unrepresentable(value, exc)


def _summarize(value: Any, limit: int) -> str:
    name = _type_name(value)
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple):
        dtype = getattr(value, "dtype", None)
        return f"{name} shape={shape}" + (
            f" dtype={dtype}" if dtype is not None and not _is_frame(value) else ""
        )
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        return f"{name} len={len(value)}"
    if callable(value):
        return f"{name} {getattr(value, '__qualname__', '')}".rstrip()
    text = repr(value).replace("\n", " ")
    return f"{name} {text[:limit]}{'…' if len(text) > limit else ''}"


def _is_frame(value: Any) -> bool:
    return type(value).__module__.startswith("pandas") and hasattr(value, "columns")


def describe(value: Any, name: str) -> str:
    lines = [f"{name}: {summarize(value)}"]
    try:
        _details(value, name, lines)
    except Exception as exc:  # user objects: a raising __repr__, a broken property
        lines.append(f"(no more details: {type(exc).__name__}: {str(exc)[:200]})")
    return "\n".join(lines)


def _details(value: Any, name: str, lines: list[str]) -> None:
    if _is_frame(value):
        lines.append(f"columns/dtypes:\n{value.dtypes.to_string()}")
        lines.append(f"head:\n{value.head(5).to_string()}")
        with contextlib.suppress(Exception):  # frames with no numeric columns, exotic dtypes
            lines.append(f"describe:\n{value.describe().to_string()}")
        lines.append(f"memory: {int(value.memory_usage(deep=True).sum()):,} bytes")
    elif type(value).__module__.startswith("pandas") and hasattr(value, "dtype"):
        lines.append(f"head:\n{value.head(10).to_string()}")
    elif type(value).__module__ == "numpy" and hasattr(value, "shape"):
        lines.append(f"values:\n{cap(repr(value), 2_000)}")
    elif isinstance(value, dict):
        lines.append(f"keys: {cap(repr(list(value)[:50]), 2_000)}")
        lines.append(f"repr: {cap(repr(value), 2_000)}")
    elif callable(value):
        import inspect

        with contextlib.suppress(TypeError, ValueError):  # builtins without a signature
            lines.append(f"signature: {name}{inspect.signature(value)}")
        doc = inspect.getdoc(value)
        if doc:
            lines.append(f"doc: {cap(doc, 1_500)}")
    else:
        lines.append(f"repr: {cap(repr(value), 4_000)}")


# -- history -------------------------------------------------------------------------------------


def format_history(shell: Any, history: History | None, n: int) -> str:
    inputs: list[str] = shell.user_ns.get("In", [])
    outputs: dict[int, Any] = shell.user_ns.get("Out", {})
    count = len(inputs) - 1
    start = max(1, count - n + 1)
    if count < 1:
        return "(no cells have run yet)"
    parts = []
    for i in range(start, count + 1):
        part = f"In [{i}]:\n{cap(inputs[i], 2_000)}"
        if i in outputs:
            part += f"\nOut[{i}]: {cap(safe_repr(outputs[i]), 1_000)}"
        if history is not None and i in history.errors:
            part += f"\nError: {history.errors[i]}"
        parts.append(part)
    return "\n\n".join(parts)


# -- the tools -----------------------------------------------------------------------------------


async def _no_one(_question: str, _choices: list[str]) -> str | None:
    return None


#: The run context of a tool called directly (in a cell, in a test), not by an agent's run.
_OUTSIDE_A_RUN = RunContext(run_id="", call_id="", tool_name="", _ask=_no_one)


async def checkpointed(
    main: MainThread,
    variables: VariableCheckpoints | None,
    run: RunContext,
    shell: Any,
    code: str,
    job: Callable[[], ToolOutput],
) -> ToolOutput:
    """Run ``job`` (the agent's ``code``) on the main thread within the variables' checkpoint of
    ``run``: what an undo could not put back is said (a ``run_warning``) before the code runs."""
    if variables is None or not run.run_id:
        output: ToolOutput = await main.run(job)
        return output
    call = await main.run(lambda: variables.before(run.run_id, _transformed(shell, code)))
    if warning := call.warning():
        run.warn("undo_not_covered", warning)

    def checked() -> ToolOutput:
        try:
            return job()
        finally:
            variables.after(call)

    try:
        output = await main.run(checked)
    except BaseException:
        variables.abandon(call)  # stopped before it ran; after() has run if it did
        raise
    return output


def python_tools(
    shell: Any,
    main: MainThread,
    history: History | None = None,
    variables: VariableCheckpoints | None = None,
) -> list[Tool]:
    """``variables``: the kernel's checkpoints, which ``run_python`` keeps so that an undo of the
    run puts the variables back."""

    # The model reads this docstring (recorded cassettes match it), so what run_python is not —
    # confined by the OS sandbox — is said in the module docstring and docs/sandbox.md instead.
    async def run_python(code: str, run: RunContext = _OUTSIDE_A_RUN) -> ToolOutput:
        """Run Python code in the user's live namespace, as if in a new notebook cell.

        Variables it defines stay defined for the user. Returns what it printed, the value of
        its last expression and any error with its traceback; plots and rich outputs are shown
        to the user.

        Args:
            code: Python source. Notebook magics such as %timeit work too.
        """
        return await checkpointed(main, variables, run, shell, code, lambda: execute(shell, code))

    async def list_variables() -> str:
        """List the user's variables with their types and shapes (DataFrames, arrays, ...)."""

        def listing() -> str:
            names = user_variables(shell)
            if not names:
                return "(no user variables yet)"
            return "\n".join(f"{name}: {summarize(value)}" for name, value in sorted(names.items()))

        text: str = await main.run(listing)
        return cap(text)

    async def describe_variable(name: str) -> str:
        """Describe one variable in detail: a DataFrame's shape, dtypes, head and statistics;
        an array's shape, dtype and values; a function's signature and docstring.

        Args:
            name: The variable's name in the user's namespace.
        """

        def describing() -> str:
            if name in shell.user_ns:
                return describe(shell.user_ns[name], name)
            variables = user_variables(shell)
            column = column_of(name, variables)
            if column is not None:
                return describe(column[1], column[0])
            frames = [f for f, v in variables.items() if name in getattr(v, "columns", ())]
            if frames:  # a small model asks for a column as if it were a variable
                frame = frames[0]
                return (
                    f"{name!r} is not a variable: it is a column of {', '.join(frames)}. Describe it "
                    f"with describe_variable({frame + '.' + name!r}), or compute on it with run_python, "
                    f"e.g. {frame}[{name!r}].describe()."
                )
            known = ", ".join(sorted(variables)[:40]) or "(none)"
            return f"No variable named {name!r}. User variables: {known}."

        text: str = await main.run(describing)
        return cap(text)

    async def read_history(n: int = 10) -> str:
        """Read the last cells the user ran in this kernel: their code, outputs and errors.

        Args:
            n: How many cells, most recent last.
        """
        text: str = await main.run(lambda: format_history(shell, history, n))
        return cap(text)

    return [
        tool(run_python),
        tool(list_variables, read_only=True),
        tool(describe_variable, read_only=True),
        tool(read_history, read_only=True),
    ]


def _transformed(shell: Any, code: str) -> str:
    """``code`` with its magics made Python, as it will run (itself when that fails: the run says why)."""
    try:
        return str(shell.transform_cell(code))
    except Exception:
        return code
