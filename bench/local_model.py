"""The embedded local model: speed, and how well it uses tools through the agent loop.

For each model: load time (first load in this process), time to first token and decode speed
(tokens/s) on a short prompt, decode speed on a reply that copies its prompt (code rewritten
with one name changed: what prompt-lookup decoding speeds up), and a fixed tool-use eval of 20
tasks run through
``ipyagent.Agent``. A tool task passes when the model calls the right tool with valid arguments,
then answers with what the tool returned (and does not call again); a no-tool task passes when
it answers in text, without a tool, and the answer holds the expected word.

    python bench/local_model.py [--models qwen2.5-coder-0.5b qwen2.5-coder-1.5b] [--tool-mode grammar]
    python bench/local_model.py --decoding 0.2 0 0.2:0    # temperature[:seed], one row each
    python bench/local_model.py --prompt-lookup 0 8       # draft tokens per step, one row each

Each ``--decoding`` is a temperature with an optional sampling seed (default: the model's own, a
temperature of 0.2 and no seed). Temperature 0 is greedy: the same prompt gives the same reply,
which is how recordings are made (see ``ipyagent.testing.ReplayModel``). Without a seed, a row at
a temperature above 0 is one sample: its eval score varies from run to run.

Targets: >= 16/20 with the default model, >= 15 tokens/s. The "cpu load" column is the 1-minute
load average before the speed run, after it and after the eval: on a 2-core machine, anything
above ~2 means another process took CPU time from these measurements.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from _report import report

from ipyagent import Agent, tool
from ipyagent.agentlib.local_models import DEFAULT_MODELS, resolve_local_model
from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.model import ModelRequest, TextChunk, UsageReport
from ipyagent.agentlib.providers.local import LocalModel


@tool(read_only=True)
def get_weather(city: str, units: Literal["C", "F"] = "C") -> str:
    """Current weather in a city.

    Args:
        city: The city's name.
        units: "C" for Celsius or "F" for Fahrenheit.
    """
    return f"{city}: 17°{units}, light rain, wind 12 km/h"


@tool(read_only=True)
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression exactly, e.g. "12.5 * (3 + 4)".

    Args:
        expression: The expression, with numbers and + - * / ( ) only.
    """
    allowed = set("0123456789+-*/(). ")
    if not set(expression) <= allowed:
        return "Error: only numbers and + - * / ( ) are allowed"
    return str(eval(expression))  # the characters were checked above


@tool(read_only=True)
def read_file(path: str) -> str:
    """Read a text file of the workspace.

    Args:
        path: The file's path, relative to the workspace.
    """
    return {"notes.txt": "Meeting moved to Thursday 3pm.", "config.toml": "threads = 6\nmode = 'fast'"}.get(
        path.strip("./"), f"Error: no file {path!r}"
    )


@tool(read_only=True)
def describe_dataframe(name: str) -> str:
    """Shape, columns and dtypes of a pandas DataFrame in the user's kernel.

    Args:
        name: The variable's name.
    """
    return f"{name}: 1,204 rows x 3 columns — date (datetime64), region (object), revenue (float64)"


@tool(read_only=True)
def get_time(timezone: str) -> str:
    """The current local time in an IANA timezone such as "Asia/Tokyo".

    Args:
        timezone: The IANA timezone name.
    """
    return f"{timezone}: 14:05"


TOOLS = [get_weather, calculate, read_file, describe_dataframe, get_time]


@dataclass(frozen=True)
class Task:
    prompt: str
    tool: str | None  # the tool to call, or None: answer without one
    check_args: Callable[[dict[str, Any]], bool] = lambda args: True
    expect: str = ""  # a word the final answer must contain (case-insensitive)


def _has(key: str, *words: str) -> Callable[[dict[str, Any]], bool]:
    return lambda a: isinstance(a.get(key), str) and all(w.lower() in a[key].lower() for w in words)


TASKS = [
    Task("What's the weather in Paris right now?", "get_weather", _has("city", "paris"), "17"),
    Task("Is it raining in Tokyo?", "get_weather", _has("city", "tokyo"), "rain"),
    Task(
        "Weather in Chicago in Fahrenheit, please.",
        "get_weather",
        lambda a: "chicago" in str(a.get("city", "")).lower() and a.get("units") == "F",
        "17",
    ),
    Task("How windy is it in Oslo today?", "get_weather", _has("city", "oslo"), "12"),
    Task(
        "Use the calculator: what is 1234 * 5678?", "calculate", _has("expression", "1234", "5678"), "7006652"
    ),
    Task("Compute (17.5 + 2.5) * 40 exactly.", "calculate", _has("expression", "17.5", "40"), "800"),
    Task("What is 98765 - 12345? Use a tool.", "calculate", _has("expression", "98765", "12345"), "86420"),
    Task(
        "Read notes.txt and tell me when the meeting is.", "read_file", _has("path", "notes.txt"), "thursday"
    ),
    Task("What does config.toml set threads to?", "read_file", _has("path", "config.toml"), "6"),
    Task("Open the file notes.txt.", "read_file", _has("path", "notes.txt"), "thursday"),
    Task(
        "How many rows does the DataFrame `sales` have?", "describe_dataframe", _has("name", "sales"), "1,204"
    ),
    Task("What columns are in my dataframe df?", "describe_dataframe", _has("name", "df"), "revenue"),
    Task("What time is it in Asia/Tokyo?", "get_time", _has("timezone", "tokyo"), "14:05"),
    Task("Tell me the current time in Europe/Berlin.", "get_time", _has("timezone", "berlin"), "14:05"),
    Task("What is the capital of France? Answer in one word.", None, expect="paris"),
    Task("Say hello to me in Spanish.", None, expect="hola"),
    Task("Write a Python one-liner that reverses a string s.", None, expect="[::-1]"),
    Task("What does the acronym CPU stand for?", None, expect="processing"),
    Task("Thanks, that's all for now!", None),
    Task("In Python, which keyword defines a function?", None, expect="def"),
]


PROSE = "Write a short paragraph about the history of the Python language."
COPY = """Here is a function from my project:

```python
def moving_average(values: list[float], window: int) -> list[float]:
    \"\"\"The mean of each run of `window` consecutive values.\"\"\"
    if window <= 0:
        raise ValueError("window must be positive")
    averages = []
    total = sum(values[:window])
    averages.append(total / window)
    for index in range(window, len(values)):
        total += values[index] - values[index - window]
        averages.append(total / window)
    return averages
```

Rename `total` to `running_sum` everywhere. Reply with the whole function only."""


async def speed(model: LocalModel, prompt: str = PROSE) -> tuple[float, float, float, int]:
    started = time.perf_counter()
    await asyncio.to_thread(model.load)
    load = time.perf_counter() - started
    request = ModelRequest(model=model.name, messages=[Message.user(prompt)])
    times: list[float] = []
    started = time.perf_counter()
    out_tokens = 0
    async for event in model.stream(request):
        if isinstance(event, TextChunk):
            times.append(time.perf_counter())
        elif isinstance(event, UsageReport):  # the provider's own report (type "usage")
            out_tokens = event.usage.output_tokens
    ttft = times[0] - started
    rate = (out_tokens - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0
    return load, ttft, rate, out_tokens


async def run_task(model: LocalModel, task: Task) -> tuple[bool, str]:
    agent = Agent(model=model, tools=TOOLS, max_turns=4, max_tokens=200)
    result = await agent.run(task.prompt)
    calls = [c for m in result.messages for c in m.tool_calls]
    answer = result.text.strip()
    if task.tool is None:
        ok = not calls and bool(answer) and task.expect.lower() in answer.lower()
        why = f"called {calls[0].name}" if calls else f"answer {answer[:60]!r}"
        return ok, why
    if not calls:
        return False, f"no tool call; answered {answer[:60]!r}"
    first = calls[0]
    if first.name != task.tool or first.arguments is None or not task.check_args(first.arguments):
        return False, f"called {first.name}({first.raw_arguments})"
    if len(calls) > 1:
        return False, f"called {len(calls)} times"
    if result.status != "completed" or task.expect.lower() not in answer.lower():
        return False, f"after the result: {result.status} {answer[:60]!r}"
    return True, f"{first.name}({first.raw_arguments}) -> {answer[:40]!r}"


@dataclass(frozen=True)
class Decoding:
    temperature: float | None  # None: the model's default
    seed: int | None

    @classmethod
    def parse(cls, text: str) -> Decoding:
        temperature, _, seed = text.partition(":")
        return cls(float(temperature), int(seed) if seed else None)

    def label(self, model: LocalModel) -> str:
        seed = "no seed" if model.seed is None else f"seed {model.seed}"
        return f"t={model.temperature:g}, {seed}"


async def main(
    models: list[str],
    tool_mode: str,
    bias: float | None,
    threads: int | None,
    decodings: list[Decoding],
    lookups: list[int | None],
    verbose: bool,
) -> None:
    rows = []
    details: dict[str, Any] = {}
    for name, decoding, lookup in [(n, d, k) for n in models for d in decodings for k in lookups]:
        path = resolve_local_model(name)
        model = LocalModel(path, name=name, tool_mode=tool_mode, seed=decoding.seed, n_threads=threads)  # type: ignore[arg-type]
        if decoding.temperature is not None:
            model.temperature = decoding.temperature
        if lookup is not None:
            model.prompt_lookup = lookup
        label = f"{model.backend}, {decoding.label(model)}, lookup {model.prompt_lookup}"
        if bias is not None:
            model.tool_call_bias = bias
        # Another process on these 2 cores slows every number here: say how busy the CPU was.
        cpu_load = [os.getloadavg()[0]]
        load, ttft, rate, out_tokens = await speed(model)
        _, _, copy_rate, copy_tokens = await speed(model, COPY)
        cpu_load.append(os.getloadavg()[0])
        passed = 0
        results = []
        started = time.perf_counter()
        for task in TASKS:
            ok, why = await run_task(model, task)
            passed += ok
            results.append({"prompt": task.prompt, "passed": ok, "detail": why})
            if verbose:
                print(f"  {'PASS' if ok else 'FAIL'} {task.prompt[:50]:50} {why}")
        eval_s = time.perf_counter() - started
        cpu_load.append(os.getloadavg()[0])
        loads = "/".join(f"{x:.1f}" for x in cpu_load)
        rows.append(
            [
                name,
                tool_mode,
                label,
                load,
                ttft * 1e3,
                rate,
                copy_rate,
                f"{passed}/{len(TASKS)}",
                eval_s,
                loads,
            ]
        )
        for r in results:
            if not r["passed"]:
                print(f"  FAIL [{name}, {label}] {r['prompt']} — {r['detail']}")
        details[f"{name} ({label})"] = {
            "load_s": round(load, 2),
            "ttft_ms": round(ttft * 1e3),
            "tokens_per_s": round(rate, 1),
            "speed_output_tokens": out_tokens,
            "copy_tokens_per_s": round(copy_rate, 1),
            "copy_output_tokens": copy_tokens,
            "prompt_lookup": model.prompt_lookup,
            "backend": model.backend,
            "eval_passed": passed,
            "eval_seconds": round(eval_s, 1),
            # 1-minute load average before and after the speed run, and after the eval.
            "cpu_load": [round(x, 2) for x in cpu_load],
            "n_threads": model.n_threads or os.cpu_count(),
            "temperature": model.temperature,
            "seed": model.seed,
            "tool_call_bias": model.tool_call_bias,
            "after_results": model.after_results,
            "tasks": results,
        }
    report(
        "local_model",
        [
            "model",
            "tools",
            "decoding",
            "load s",
            "TTFT ms",
            "tok/s",
            "copy tok/s",
            "eval",
            "eval s",
            "cpu load",
        ],
        rows,
        {
            "default_order": list(DEFAULT_MODELS),
            "cpu_count": os.cpu_count(),
            "models": details,
            "targets": {"eval": 16, "tok_s": 15},
        },
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="+", default=[DEFAULT_MODELS[0]])
    parser.add_argument("--tool-mode", default="grammar", choices=["grammar", "free"])
    parser.add_argument("--bias", type=float, default=None, help="tool_call_bias (default: the model's)")
    parser.add_argument("--threads", type=int, default=None, help="n_threads (default: the model's)")
    parser.add_argument("--tasks", type=int, default=len(TASKS), help="run only the first N tasks")
    parser.add_argument(
        "--decoding",
        nargs="+",
        type=Decoding.parse,
        default=[Decoding(None, None)],
        metavar="T[:SEED]",
        help="temperature and optional seed, one row each (default: the model's own)",
    )
    parser.add_argument(
        "--prompt-lookup",
        nargs="+",
        type=int,
        default=[None],
        metavar="N",
        help="draft tokens per step of prompt-lookup decoding, one row each (default: the model's own)",
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    del TASKS[args.tasks :]
    asyncio.run(
        main(
            args.models,
            args.tool_mode,
            args.bias,
            args.threads,
            args.decoding,
            args.prompt_lookup,
            args.verbose,
        )
    )
