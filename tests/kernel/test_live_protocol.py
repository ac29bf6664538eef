"""The live-notebook protocol without a kernel: parsing, the handshake rule, and that the
kernel's half and the page's half (labext/) say the same numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ipyagent import __version__
from ipyagent.kernel.live_document import LiveDocument
from ipyagent.kernel.live_protocol import PROTOCOL, answer_hello, parse_page_message

ROOT = Path(__file__).resolve().parents[2]


def hello(protocol: int, version: str = "1.0.0") -> dict[str, object]:
    return {"kind": "hello", "protocol": protocol, "version": version, "client": "Lab", "path": "a.ipynb"}


def test_the_page_and_the_kernel_speak_the_same_protocol_and_release() -> None:
    js = (ROOT / "labext" / "src" / "protocol.js").read_text()
    assert re.search(r"export const PROTOCOL = (\d+);", js)[1] == str(PROTOCOL)  # type: ignore[index]
    assert json.loads((ROOT / "labext" / "package.json").read_text())["version"] == __version__
    built = json.loads((ROOT / "ipyagent" / "labextension" / "package.json").read_text())
    assert built["name"] == "ipyagent" and built["version"] == __version__
    assert (ROOT / "ipyagent" / "labextension" / built["jupyterlab"]["_build"]["load"]).is_file()


def test_a_hello_in_the_same_protocol_is_welcomed() -> None:
    parsed = parse_page_message(hello(PROTOCOL))
    assert parsed is not None and parsed["kind"] == "hello"
    welcome = {"kind": "welcome", "protocol": PROTOCOL, "version": "0.1.0"}
    assert answer_hello(parsed, version="0.1.0") == welcome


@pytest.mark.parametrize(
    ("page_protocol", "says", "not_says"),
    [(PROTOCOL - 1, "Reload the page", "Restart the kernel"), (PROTOCOL + 1, "Restart the kernel", "Reload")],
)
def test_a_hello_in_another_protocol_says_which_side_to_renew(
    page_protocol: int, says: str, not_says: str
) -> None:
    parsed = parse_page_message(hello(page_protocol, "7.7.7"))
    assert parsed is not None and parsed["kind"] == "hello"
    answer = answer_hello(parsed, version="0.1.0")
    assert answer["kind"] == "mismatch"
    assert says in answer["message"] and not_says not in answer["message"]
    assert f"7.7.7, protocol {page_protocol}" in answer["message"]
    assert f"0.1.0, protocol {PROTOCOL}" in answer["message"]


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        {"kind": "hello", "protocol": "1", "version": "1"},
        {"kind": "hello", "protocol": True, "version": "1"},
        {"kind": "response", "id": 3, "ok": True, "result": {}},
        {"kind": "response", "id": "r", "ok": True, "result": "not a dict"},
        {"kind": "shout"},
        {"kind": "request", "id": "u", "method": "read_notebook", "params": {}},
        {"kind": "request", "id": 1, "method": "undo_variables", "params": {}},
    ],
)
def test_what_is_not_a_page_message_is_refused(data: object) -> None:
    assert parse_page_message(data) is None


def test_a_failed_response_keeps_its_reason() -> None:
    parsed = parse_page_message({"kind": "response", "id": "r", "ok": False, "error": "no notebook"})
    assert parsed == {"kind": "response", "id": "r", "ok": False, "error": "no notebook"}


def test_the_page_asks_the_kernel_to_undo_a_runs_variables() -> None:
    data = {"kind": "request", "id": "u-1", "method": "undo_variables", "params": {"run": "run_1"}}
    assert parse_page_message(data) == data


def test_the_live_document_tells_the_cells_apart() -> None:
    doc = LiveDocument.model_validate(
        {
            "path": "a.ipynb",
            "dirty": False,
            "cells": [
                {"id": "a", "cell_type": "code", "source": "1/0", "execution_count": 2, "outputs": [
                    {"type": "error", "ename": "ZeroDivisionError", "evalue": "by zero", "traceback": "t"}
                ]},
                {"id": "b", "cell_type": "code", "source": "x", "execution_count": 5, "outputs": [
                    {"type": "error", "ename": "NameError", "evalue": "x", "traceback": "t"}
                ]},
                {"id": "c", "cell_type": "code", "source": "plot()", "execution_count": 6, "outputs": [
                    {"type": "display", "text": "<Figure>", "mime_types": ["image/png", "text/plain"]},
                    {"type": "unknown", "output_type": "new_kind"},
                ]},
                {"id": "d", "cell_type": "raw", "source": ""},
            ],
            "active_cell_id": "c",
            "selected_cell_ids": ["d", "a"],
        }
    )  # fmt: skip
    assert doc.active_cell is not None and doc.active_cell.id == "c"
    assert [c.id for c in doc.selected_cells] == ["a", "d"]
    assert doc.last_failed_cell is not None and doc.last_failed_cell.id == "b"
    assert doc.running_cells == ()
    shown = doc.cells[2].outputs[0]
    assert getattr(shown, "shows_image", False)
