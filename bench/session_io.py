"""Session I/O: append N mixed-size messages to a session file, then resume it.

Appends must be flat (a record is one write at the end of the file, never a rewrite), so the
time per message at the start and at the end of the file should be the same. The main run
appends without fsync, to measure ipyagent's own cost; a sample with fsync on (the default)
shows what the disk adds. Resume is ``Session.open`` on the finished file: read, parse and
validate every record. Peak memory is traced over the resume.

    python bench/session_io.py [--messages 10000] [--fsync-sample 200]

Target: resume of 10,000 messages < 1 s.
"""

from __future__ import annotations

import argparse
import gc
import random
import tempfile
import time
import tracemalloc
from pathlib import Path

from _report import report

from ipyagent.agentlib.messages import Message, TextBlock, ToolCallBlock, ToolResultBlock
from ipyagent.agentlib.sessions import Session
from ipyagent.agentlib.usage import Usage


def mixed_messages(n: int, seed: int = 0) -> list[Message]:
    """A conversation's worth of messages: prompts, replies, tool calls and results of
    lengths from a few words to ~20 kB (log-uniform, as real tool output is)."""
    rng = random.Random(seed)
    messages: list[Message] = []
    while len(messages) < n:
        size = int(10 ** rng.uniform(1.3, 4.3))
        kind = len(messages) % 4
        if kind == 0:
            messages.append(Message.user("please " + "x" * size))
        elif kind == 1:
            call = ToolCallBlock.from_raw(
                id=f"call_{len(messages)}", name="run_code", raw_arguments=f'{{"code": "print({size})"}}'
            )
            messages.append(Message(role="assistant", content=(TextBlock(text="Let me check."), call)))
        elif kind == 2:
            result = ToolResultBlock(
                tool_call_id=f"call_{len(messages) - 1}", name="run_code", content="y" * size
            )
            messages.append(Message(role="user", content=(result,)))
        else:
            messages.append(Message(role="assistant", content=(TextBlock(text="z" * size),), model="m/x"))
    return messages[:n]


def append_all(
    path: Path, messages: list[Message], *, fsync: bool, window: int
) -> tuple[float, float, float]:
    """Seconds in all, and µs/message over the first and the last ``window`` appends."""
    times: list[float] = []
    with Session.open(path, fsync=fsync, model="bench/model") as session:
        usage = Usage(input_tokens=100, output_tokens=10, requests=1)
        for i, message in enumerate(messages):
            started = time.perf_counter()
            session.append_message(message)
            times.append(time.perf_counter() - started)
            if i % 2 == 1:  # a usage record per model reply, as a run writes
                session.append_usage(usage)
    first = sum(times[:window]) / len(times[:window]) * 1e6
    last = sum(times[-window:]) / len(times[-window:]) * 1e6
    return sum(times), first, last


def main(count: int, fsync_sample: int) -> None:
    messages = mixed_messages(count)
    window = max(1, min(1000, count // 10))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.agent.jsonl"
        total, first, last = append_all(path, messages, fsync=False, window=window)
        size = path.stat().st_size
        gc.collect()
        tracemalloc.start()
        started = time.perf_counter()
        with Session.open(path, read_only=True) as resumed:
            resume_s = time.perf_counter() - started
            loaded = len(resumed.state.messages)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        # Untraced resume timing too (tracemalloc slows allocation-heavy code): the best of 3.
        untraced = []
        for _ in range(3):
            started = time.perf_counter()
            Session.open(path, read_only=True).close()
            untraced.append(time.perf_counter() - started)
        resume_untraced = min(untraced)
        assert loaded == count, (loaded, count)
        sample = messages[:fsync_sample]
        synced_path = Path(folder) / "synced.agent.jsonl"
        _, synced_first, synced_last = append_all(
            synced_path, sample, fsync=True, window=max(1, len(sample) // 4)
        )
    rows = [
        ["append (no fsync)", count, first, last],
        ["append (fsync)", len(sample), synced_first, synced_last],
    ]
    report(
        "session_io",
        ["case", "messages", "µs/msg first", "µs/msg last"],
        rows,
        {
            "window_messages": window,
            "file_mib": round(size / 2**20, 1),
            "append_total_s": round(total, 3),
            "resume_s": round(resume_untraced, 3),
            "resume_runs_s": [round(t, 3) for t in untraced],
            "resume_traced_s": round(resume_s, 3),
            "resume_peak_mib": round(peak / 2**20, 1),
            "resume_target_s": 1.0,
        },
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--fsync-sample", type=int, default=200)
    args = parser.parse_args()
    main(args.messages, args.fsync_sample)
