"""The five append-only JSONL files under the three kinds of damage, each against its stated policy.

A torn last line (a write cut short) is skipped with a warning by every reader, and the next
append starts a line of its own. A damaged line (not JSON) and a line of the wrong shape (JSON,
but not a record) anywhere else either stop the reading with a ``UserError`` naming the file and
the line (cassettes, map checkpoints, pipeline runs) or are skipped with a warning naming the line
and left in the file (sessions, summaries). The table is in docs/architecture.md.
"""

from __future__ import annotations

import io
import json
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from ipyagent.agentlib.checkpoint import CheckpointRecord, MapCheckpointWarning, open_checkpoint
from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.jsonl import Policy, append_line, json_line, open_for_append, read_lines, settle_tail
from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.pipeline_log import PipelineWarning, RunLog, read_run
from ipyagent.agentlib.providers.replay import Cassette, CassetteWarning, Recording
from ipyagent.agentlib.sessions import Session, SessionWarning, read_session
from ipyagent.agentlib.summaries import RunSummary, Summaries, SummariesWarning

FINGERPRINT = "f" * 64


@dataclass(frozen=True)
class Kind:
    """One kind of file: how to write a few records, read them back, and append one more."""

    name: str
    warning: type[Warning]
    damaged: Literal["raise", "skip"]
    code: str
    make: Callable[[Path], None]
    read: Callable[[Path], list[Any]]
    append: Callable[[Path], None] | None


# -- sessions --------------------------------------------------------------------------------------


def make_session(path: Path) -> None:
    with Session.open(path) as session:
        for i in range(4):
            session.append_message(Message.user(f"m{i}"))


def read_session_texts(path: Path) -> list[Any]:
    return [m.text for m in read_session(path).messages]


def append_session(path: Path) -> None:
    with Session.open(path) as session:
        session.append_message(Message.user("new"))


# -- cassettes -------------------------------------------------------------------------------------


def make_cassette(path: Path) -> None:
    cassette = Cassette(path)
    for i in range(4):
        request = {"system": "", "tools": [], "settings": {}, "messages": [{"role": "user", "text": f"m{i}"}]}
        cassette.append(Recording(model_id="test/model", context_limit=None, request=request, events=[]))


def read_cassette(path: Path) -> list[Any]:
    return [r.request["messages"][-1]["text"] for r in Cassette(path).records]


# -- map checkpoints -------------------------------------------------------------------------------


def make_checkpoint(path: Path) -> None:
    store = open_checkpoint(path, FINGERPRINT, fsync=False)
    for i in range(4):
        store.write(CheckpointRecord(i, f"k{i}", True, i * 10))
    store.close()


def read_checkpoint(path: Path) -> list[Any]:
    store = open_checkpoint(path, FINGERPRINT, fsync=False)
    return [(r.index, r.output) for r in sorted(store.records.values(), key=lambda r: r.index)]


def append_checkpoint(path: Path) -> None:
    store = open_checkpoint(path, FINGERPRINT, fsync=False)
    store.write(CheckpointRecord(9, "k9", True, 90))
    store.close()


# -- pipeline runs ---------------------------------------------------------------------------------


def make_run(path: Path) -> None:
    log = RunLog.create(path, {"pipeline": "p", "run": "r1", "steps": ["a", "b"], "created": ""})
    log.write({"kind": "input", "state": {}})
    for step in ("a", "b"):
        log.write({"kind": "start", "step": step, "attempt": 1})
        log.write({"kind": "done", "step": step, "attempt": 1, "state": {step: True}})
    log.close()


def read_steps(path: Path) -> list[Any]:
    history = read_run(path)
    return [(name, record.status) for name, record in history.steps.items()]


def append_run(path: Path) -> None:
    log = RunLog.reopen(path)
    log.write({"kind": "start", "step": "c", "attempt": 1})
    log.close()


# -- summaries -------------------------------------------------------------------------------------


def summary(i: int) -> RunSummary:
    return RunSummary(at=1000.0 + i, run_id=f"run{i}", status="completed", summary=f"s{i}")


def make_summaries(path: Path) -> None:
    path.write_text("".join(json_line(summary(i).to_json()) for i in range(4)))


def read_summaries(path: Path) -> list[Any]:
    return [r.run_id for r in Summaries(path).records()]


def append_summary(path: Path) -> None:
    # What on_run_end does once the summary is written: the plugin's own append.
    Summaries(path, keep=100)._keep(summary(9))


KINDS = [
    Kind("session", SessionWarning, "skip", "", make_session, read_session_texts, append_session),
    Kind("cassette", CassetteWarning, "raise", "cassette_damaged", make_cassette, read_cassette, None),
    Kind(
        "checkpoint",
        MapCheckpointWarning,
        "raise",
        "checkpoint_damaged",
        make_checkpoint,
        read_checkpoint,
        append_checkpoint,
    ),
    Kind("pipeline", PipelineWarning, "raise", "pipeline_run_damaged", make_run, read_steps, append_run),
    Kind("summaries", SummariesWarning, "skip", "", make_summaries, read_summaries, append_summary),
]
by_name = pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


@by_name
def test_a_torn_last_line_is_skipped_with_a_warning_and_the_next_append_starts_clean(
    kind: Kind, tmp_path: Path
) -> None:
    path = tmp_path / "f.jsonl"
    kind.make(path)
    *whole, last = lines_of(path)
    kept = tmp_path / "kept.jsonl"
    kept.write_bytes(b"".join(whole))
    expected = kind.read(kept)  # the file as it was before the last write: no warning

    path.write_bytes(b"".join(whole) + last[: len(last) // 2])
    with pytest.warns(kind.warning, match="torn last line"):
        assert kind.read(path) == expected
    if kind.append is None:  # a cassette is only appended to by the recording that started it
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kind.warning)  # the torn line, as the read above said
        kind.append(path)
    after = kind.read(path)  # no warning: the torn bytes are gone, the new line is whole
    assert after[: len(expected)] == expected and len(after) == len(expected) + 1
    assert all(json.loads(line) is not None for line in lines_of(path))


DAMAGE = {"not JSON": b'{"oops', "wrong shape": b"[1, 2]"}


@by_name
@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("where", ["middle", "last"])
def test_a_damaged_line_follows_the_files_policy(kind: Kind, damage: str, where: str, tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    kind.make(path)
    lines = lines_of(path)
    index = 2 if where == "middle" else len(lines) - 1
    number = index + 1
    without = tmp_path / "without.jsonl"
    without.write_bytes(b"".join(lines[:index] + lines[index + 1 :]))
    lines[index] = DAMAGE[damage] + b"\n"  # a whole line, newline and all: no crash tore it
    path.write_bytes(b"".join(lines))
    before = path.read_bytes()

    if kind.damaged == "raise":
        with pytest.raises(UserError) as raised:
            kind.read(path)
        assert raised.value.code == kind.code
        assert str(path) in raised.value.info.message and f"line {number}" in raised.value.info.message
        assert raised.value.hint
    else:
        expected = kind.read(without)
        with pytest.warns(kind.warning, match=f"skipped line {number} "):
            assert kind.read(path) == expected
    assert path.read_bytes() == before  # never cut or rewritten by reading


def test_a_session_keeps_a_whole_last_line_it_cannot_read(tmp_path: Path) -> None:
    # Only bytes that are not JSON are a torn line; a whole line of the wrong shape lacking its
    # newline (a hand edit) is skipped like any other and stays in the file.
    path = tmp_path / "f.agent.jsonl"
    make_session(path)
    path.write_bytes(path.read_bytes() + b"[1, 2]")
    with pytest.warns(SessionWarning, match="skipped line 6 "):
        append_session(path)
    assert b"[1, 2]\n" in path.read_bytes()


@pytest.mark.parametrize(
    ("content", "settled"),
    [
        (b"", b""),
        (b'{"a":1}\n', b'{"a":1}\n'),
        (b'{"a":1}\n{"b":', b'{"a":1}\n'),
        (b'{"a":1}\n{"b":2}', b'{"a":1}\n{"b":2}\n'),
        (b'{"a":1}\n{"b":"' + b"x" * 200_000, b'{"a":1}\n'),  # torn, longer than one read back
    ],
    ids=["empty", "clean", "torn", "no newline", "long torn"],
)
def test_appending_settles_the_tail_first(content: bytes, settled: bytes, tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(content)
    fd = open_for_append(path)
    append_line(fd, json_line({"c": 3}), fsync=False)
    assert settle_tail(fd) == 0  # nothing left to settle
    os.close(fd)
    assert path.read_bytes() == settled + b'{"c":3}\n'


def test_reading_lines_numbers_them_passes_over_blank_ones_and_keeps_a_whole_last_line(
    tmp_path: Path,
) -> None:
    policy = Policy(what="file", damaged="raise", torn="nothing is lost", hint="", code="damaged")
    path = tmp_path / "f.jsonl"
    data = b'{"a":1}\n\n{"b":2}\n{"c":3}'
    read = read_lines(io.BytesIO(data), path, lambda line, number: (number, json.loads(line)), policy)
    assert read.records == [(1, {"a": 1}), (3, {"b": 2}), (4, {"c": 3})]
    assert read.notes == [] and read.whole_length == len(data)
    read = read_lines(io.BytesIO(data[:-3]), path, lambda line, number: number, policy)
    assert read.records == [1, 3] and read.whole_length == len(b'{"a":1}\n\n{"b":2}\n')
    assert read.notes == [
        "f.jsonl: skipped a torn last line (4 bytes, a write cut short by a crash); every line "
        "before it was kept, and nothing is lost."
    ]
