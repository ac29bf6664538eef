"""Data questions answered through ``%%agent`` in a real kernel, as a user asks them.

    pip install -e '.[bench-data]'
    python bench/data_tasks.py                                  # the embedded default model
    python bench/data_tasks.py --model local/qwen2.5-coder-0.5b --limit 8
    python bench/data_tasks.py --model openai/gpt-4.1 --kinds joins,plots --context all

The questions (``_data_questions.py``: 48, eight kinds, six of each) are about real datasets
that ship inside installed packages; pandas computes each expected answer here from the same
code the kernel's setup cell runs. Each question gets a fresh kernel, started by nbclient (as
nbconvert and papermill run notebooks), with ``%load_ext ipyagent`` and a setup cell that loads the frames
it names (``penguins``, ``weather``, ...), then one cell ``%%agent -y -o _bench_run`` holding
the question. A fresh kernel per question, because a run may change the frames (a
``dropna(inplace=True)``) or leave variables behind, and the next question would see them; the
kernel's start and the setup cell are timed apart, not counted in a question's seconds.

``-o`` stores the run's :class:`~ipyagent.RunResult` in the namespace, and a last cell prints
what the bench reads from it: the final text, status, usage and tool calls. The final text is
checked by ``_data_answers.accepts``: numbers within the rounding the question asked for
(thousands separators and percentages read), names case-insensitively. A question is *correct*,
*wrong*, or *no answer*: the run did not complete (failed, stopped by a guard, over
``--timeout``: the kernel is interrupted) or said nothing. "invented" counts questions whose
run read a file (or answered with code that does), met a NameError or described a variable
that does not exist (a column taken for a variable): the data was in the namespace, under the
name the question gave.

Results of other models (or other ``--context``) already in ``bench/results/data_tasks.json``
are kept and shown beside this run's (``--fresh`` drops them); ``--rescore`` checks the stored
answers again, with no model. Each question's record has the 1-minute load average before and
after it (``cpu_load``): above ~2 on a 2-core machine, another process took CPU time from the
model.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _data_answers import accepts
from _data_questions import KINDS, QUESTIONS, Question, expected_answer, load, setup_code
from _report import RESULTS, report_sections

NAME = "data_tasks"
#: Seconds an interrupted run may take to stop before the kernel is shut down.
STOP_GRACE = 180
MARK = "BENCH-RESULT "

#: The last cell: what the bench reads from the run's result, as one line of JSON.
EXTRACT = f"""\
import json as _bench_json
_bench_r = globals().get("_bench_run")
if _bench_r is None:
    print({MARK!r} + "null")
else:
    print({MARK!r} + _bench_json.dumps({{
        "status": _bench_r.status,
        "reason": _bench_r.reason,
        "text": _bench_r.text,
        "usage": _bench_r.usage.model_dump(),
        "models": sorted({{m.model for m in _bench_r.messages if m.model}}),
        "calls": [{{"name": c.name, "arguments": c.raw_arguments[:2000]}}
                  for m in _bench_r.messages for c in m.tool_calls],
        "results": [{{"name": b.name, "error": b.is_error, "text": b.content[:2000]}}
                    for m in _bench_r.messages for b in m.tool_results],
    }}))
"""

# Traces of an answer that did not use the data it was given.
_FILE_READS = ("read_csv(", "read_excel(", "read_json(", "read_parquet(", "open(")
_FILE_TOOLS = ("read_file", "list_files", "search_files")
_STRAY_ERRORS = {
    "FileNotFoundError": "a file not found",
    "No such file": "a file not found",
    "NameError": "a NameError",
    "No variable named": "a variable not in the namespace",  # describe_variable's answer
}


def strays(
    calls: list[dict[str, Any]], results: list[dict[str, Any]], names: set[str], answer: str = ""
) -> list[str]:
    """How a run looked outside the namespace (``names``, what the setup cell bound): files it
    read or told the user to read, variables it made up."""
    found = ["the answer reads a file"] if any(read in answer for read in _FILE_READS) else []
    for call in calls:
        if call["name"] in _FILE_TOOLS:
            found.append(f"called {call['name']}")
        elif any(read in call["arguments"] for read in _FILE_READS):
            found.append("code reads a file")
        elif call["name"] == "describe_variable" and _argument(call, "name") not in names:
            found.append("a variable not in the namespace")
    for result in results:
        found += [what for error, what in _STRAY_ERRORS.items() if error in result["text"]]
    return sorted(set(found))


def _argument(call: dict[str, Any], key: str) -> Any:
    try:
        return json.loads(call["arguments"]).get(key)
    except (ValueError, AttributeError):
        return None


def kernel_dir(work: Path) -> dict[str, str]:
    """A kernelspec on this Python (PYTHONPATH reaches it) and private Jupyter folders."""
    spec = work / "jupyter" / "kernels" / "bench"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "bench", "language": "python"})
    )
    return {
        "JUPYTER_PATH": str(work / "jupyter"),
        "JUPYTER_RUNTIME_DIR": str(work / "runtime"),
        "IPYTHONDIR": str(work / "ipython"),
    }


def agent_cell(question: Question, model: str | None, context: str | None) -> str:
    # Its own conversation: the kernels share the workspace, where a conversation is saved and
    # the next kernel would resume it.
    flags = ["-y", "-s", question.id]
    if model:
        flags += ["-m", model]
    if context:
        flags += ["--context", context]
    return f"%%agent {' '.join(flags)} -o _bench_run\n{question.text}"


def ask(
    question: Question, *, model: str | None, context: str | None, timeout: int, workspace: Path, cold: bool
) -> dict[str, Any]:
    """Run one question in a fresh kernel started in ``workspace`` (a user's project folder: the
    same for every question): what the run did, and the seconds it took. ``cold``: the local
    model keeps no prompt opening between kernels (as before it could)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError

    cells = [
        "%load_ext ipyagent",
        setup_code(question.frames),
        agent_cell(question, model, context),
        EXTRACT,
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        saved = dict(os.environ)
        os.environ.update(kernel_dir(work))
        # A user's notebook: no headless run, no recording, the model the bench was told.
        for key in ("IPYAGENT_HEADLESS", "JPY_SESSION_NAME", "IPYAGENT_REPLAY"):
            os.environ.pop(key, None)
        if cold:
            os.environ["IPYAGENT_PROMPT_CACHE"] = "off"
        client = NotebookClient(
            nb,
            timeout=300,
            kernel_name="bench",
            allow_errors=True,
            resources={"metadata": {"path": str(workspace)}},
        )
        stuck, failure = False, ""
        try:
            started = time.perf_counter()
            with client.setup_kernel():
                for index in (0, 1):
                    client.execute_cell(nb.cells[index], index)
                setup_s = time.perf_counter() - started
                # At the deadline the kernel gets SIGINT, as from a front end's Stop: the run is
                # cancelled, the cell ends and the result is still read. nbclient's own timeout
                # is only the backstop for a run that does not stop: the cell that timed out
                # would keep reading the kernel's messages, taking the next cell's output.
                deadline = _Interrupt(client, timeout)
                client.timeout = timeout + STOP_GRACE
                started = time.perf_counter()
                try:
                    client.execute_cell(nb.cells[2], 2)
                except CellTimeoutError:
                    stuck = True
                except Exception as exc:  # nbclient gave up on the cell (an invalid output, a dead
                    # kernel): the question has no answer, the run goes on, and the error says why
                    stuck, failure = True, f"{type(exc).__name__}: {str(exc)[:300]}"
                finally:
                    deadline.cancel()
                took = time.perf_counter() - started
                if not stuck:
                    client.timeout = 120
                    client.execute_cell(nb.cells[3], 3)
        finally:
            os.environ.clear()
            os.environ.update(saved)
    timed_out = deadline.at is not None
    seconds = min(took, timeout) if timed_out else took
    # After the interrupt: how long the run took to stop.
    stop_s = took - deadline.at if deadline.at is not None else 0.0
    run = _read_result(nb.cells[3])
    setup_errors = [_error(c) for c in nb.cells[:2] if _error(c)]
    if setup_errors:
        raise SystemExit(
            f"The setup cells of {question.id} failed: {setup_errors}; pip install -e '.[bench-data]'"
        )
    cell_error = _error(nb.cells[2]) or failure
    if run is None and cell_error.startswith("UserError"):  # no key, no model: every question would fail
        raise SystemExit(f"%%agent failed before running: {cell_error}")
    return {
        "run": run,
        "timed_out": timed_out,
        "seconds": seconds,
        "setup_seconds": setup_s,
        "stop_seconds": stop_s,
        "error": cell_error,
    }


class _Interrupt:
    """SIGINT to the kernel of ``client`` after ``seconds``; ``at``: when it was sent (seconds
    after the start), None if it was not."""

    def __init__(self, client: Any, seconds: float) -> None:
        self.process = client.km.provisioner.process  # the kernel's Popen
        self.started = time.perf_counter()
        self.at: float | None = None
        self.timer = threading.Timer(seconds, self._fire)
        self.timer.start()

    def _fire(self) -> None:
        self.at = time.perf_counter() - self.started
        self.process.send_signal(signal.SIGINT)

    def cancel(self) -> None:
        self.timer.cancel()


def _error(cell: Any) -> str:
    """The error a cell ended with, as its traceback's last lines say it ('' if none)."""
    errors = [o for o in cell.outputs if o.output_type == "error"]
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(errors[-1].traceback[-2:])) if errors else ""


def _read_result(cell: Any) -> dict[str, Any] | None:
    for output in cell.outputs:
        for line in output.get("text", "").splitlines():
            if line.startswith(MARK):
                value: dict[str, Any] | None = json.loads(line[len(MARK) :])
                return value
    return None


def verdict(question: Question, status: str, text: str) -> str:
    """correct, wrong or no answer: a run that did not complete (or timed out) gave none."""
    if status != "completed" or not text.strip():
        return "no answer"
    return "correct" if accepts(expected_answer(question), text) else "wrong"


@functools.cache
def namespace_names(frames: tuple[str, ...]) -> set[str]:
    """The names the setup cell binds: the frames, pd, the loaders it imported."""
    return set(load(frames))


def record(question: Question, asked: dict[str, Any], label: str) -> dict[str, Any]:
    run = asked["run"] or {
        "status": "none",
        "reason": "",
        "text": "",
        "usage": {},
        "calls": [],
        "results": [],
    }
    usage = run["usage"]
    text = run["text"].strip()
    status = "timeout" if asked["timed_out"] else run["status"]
    results = [{**r, "text": r["text"][:500]} for r in run["results"]]
    return {
        "model": label,
        "id": question.id,
        "kind": question.kind,
        "question": question.text,
        "frames": list(question.frames),
        "expected": str(expected_answer(question)),
        "answer": text,
        "verdict": verdict(question, status, text),
        "status": status,
        "reason": run["reason"],
        "seconds": round(asked["seconds"], 1),
        "setup_seconds": round(asked["setup_seconds"], 1),
        "stop_seconds": round(asked["stop_seconds"], 1),
        # The whole prompt: what the provider read anew plus what it took from its cache.
        "prompt_tokens": usage.get("input_tokens", 0) + usage.get("cache_read_tokens", 0),
        "cached_tokens": usage.get("cache_read_tokens", 0),
        "generated_tokens": usage.get("output_tokens", 0),
        "requests": usage.get("requests", 0),
        "tools": [c["name"] for c in run["calls"]],
        "tool_calls": run["calls"],
        "tool_results": results,
        "tool_errors": sum(r["error"] for r in run["results"]),
        "figure": any("shown to the user" in r["text"] for r in run["results"]),
        "strays": strays(run["calls"], results, namespace_names(question.frames), text),
        "cell_error": asked["error"][-500:],
        "models": run.get("models", []),
        "cpu_load": asked["cpu_load"],
    }


def summary_row(label: str, kind: str, records: list[dict[str, Any]]) -> list[Any]:
    verdicts = Counter(r["verdict"] for r in records)
    seconds = [r["seconds"] for r in records]
    tools = Counter(t for r in records for t in r["tools"])

    def mean(key: str) -> int:
        return round(statistics.mean(int(r[key]) for r in records))

    return [
        label,
        kind,
        len(records),
        verdicts["correct"],
        verdicts["wrong"],
        verdicts["no answer"],
        statistics.median(seconds),
        statistics.mean(seconds),
        mean("prompt_tokens"),
        mean("generated_tokens"),
        round(statistics.mean(r["requests"] for r in records), 1),
        sum(bool(r["strays"]) for r in records),
        ", ".join(f"{name} {n}" for name, n in tools.most_common()) or "-",
    ]


COLUMNS = [
    "model",
    "kind",
    "n",
    "correct",
    "wrong",
    "no answer",
    "median s",
    "mean s",
    "prompt tok",
    "gen tok",
    "requests",
    "invented",
    "tools called",
]


def main(args: argparse.Namespace) -> None:
    wanted = set(args.kinds.split(",")) if args.kinds else set(KINDS)
    unknown = wanted - set(KINDS)
    if unknown:
        raise SystemExit(f"Unknown kinds {sorted(unknown)}; the kinds are {', '.join(KINDS)}.")
    questions = [q for q in QUESTIONS if q.kind in wanted]
    questions = questions[: args.limit]
    if args.model:
        model = args.model
    else:
        from ipyagent.agentlib.endpoints import default_model_id

        model = default_model_id()
        if model == "local/default":  # say which: the table compares models by name
            from ipyagent.agentlib.local_models import default_local_model

            model = f"local/{default_local_model()}"
    label = model + (f" --context {args.context}" if args.context else "") + (" --cold" if args.cold else "")
    records = []
    loads = [os.getloadavg()[0]]
    workspace = Path(tempfile.mkdtemp(prefix="ipyagent-data-tasks-"))
    try:
        for number, question in enumerate(questions, 1):
            before = os.getloadavg()[0]
            asked = ask(
                question,
                model=args.model,
                context=args.context,
                timeout=args.timeout,
                workspace=workspace,
                cold=args.cold,
            )
            asked["cpu_load"] = [round(before, 2), round(os.getloadavg()[0], 2)]
            entry = record(question, asked, label)
            records.append(entry)
            print(
                f"[{number}/{len(questions)}] {entry['verdict']:9} {entry['seconds']:6.1f}s {question.id:14} "
                f"expected {entry['expected']!r}; answered {entry['answer'][:100]!r}",
                flush=True,
            )
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    loads.append(os.getloadavg()[0])
    this_run = {
        "questions": len(questions),
        "timeout_s": args.timeout,
        # The 1-minute load average before and after: above ~2, another process took CPU time.
        "cpu_load": "/".join(f"{x:.1f}" for x in loads),
        "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    print(f"this run: {label}: {this_run}")
    old = {"questions": [], "runs": {}} if args.fresh else _previous()
    runs = {**old["runs"], label: this_run}
    write([r for r in old["questions"] if r.get("model") != label] + records, runs)


def write(every: list[dict[str, Any]], runs: dict[str, Any]) -> None:
    """The table by model and kind, printed, and the JSON with every question's record."""
    rows = []
    for name in dict.fromkeys(r["model"] for r in every):
        mine = [r for r in every if r["model"] == name]
        for kind in KINDS:
            of_kind = [r for r in mine if r["kind"] == kind]
            if of_kind:
                rows.append(summary_row(name, kind, of_kind))
        rows.append(summary_row(name, "all", mine))
    extra = {"runs": runs, "cpu_count": os.cpu_count(), "questions": every}
    report_sections(NAME, [("by model and kind", COLUMNS, rows)], extra)


def rescore() -> None:
    """Verdicts and strays again from the JSON, with the current checker: no model runs."""
    old = _previous()
    by_id = {q.id: q for q in QUESTIONS}
    for entry in old["questions"]:
        question = by_id.get(entry["id"])
        if question is None or question.text != entry["question"]:
            print(f"{entry['id']}: the question changed since it was asked; left as it was")
            continue
        entry["expected"] = str(expected_answer(question))
        entry["verdict"] = verdict(question, entry["status"], entry["answer"])
        calls, results = entry["tool_calls"], entry.get("tool_results", [])
        entry["strays"] = strays(calls, results, namespace_names(question.frames), entry["answer"])
    write(old["questions"], old["runs"])


def _previous() -> dict[str, Any]:
    """What the results file holds: every question asked so far and each run's conditions."""
    path = RESULTS / f"{NAME}.json"
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"questions": [], "runs": {}}
    return {"questions": old.get("questions", []), "runs": old.get("runs", {})}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default=None, help="model id, e.g. local/qwen2.5-coder-0.5b or openai/gpt-4.1"
    )
    parser.add_argument("--limit", type=int, default=None, help="ask only the first N questions")
    parser.add_argument("--kinds", default=None, help=f"comma-separated, of: {','.join(KINDS)}")
    parser.add_argument("--timeout", type=int, default=300, help="seconds a question may take")
    parser.add_argument(
        "--context",
        default=None,
        help="passed to the magic's --context: cell,outline,variables,error,all,none",
    )
    parser.add_argument("--fresh", action="store_true", help="drop other models' results from the JSON")
    parser.add_argument(
        "--cold",
        action="store_true",
        help="each kernel reads the local model's whole prompt (no opening kept between kernels)",
    )
    parser.add_argument(
        "--rescore", action="store_true", help="check the answers in the JSON again; run no model"
    )
    arguments = parser.parse_args()
    if arguments.rescore:
        rescore()
    else:
        main(arguments)
