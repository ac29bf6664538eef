"""The sans-IO decoders (SSE, NDJSON) and the <think> splitter, on the cases that matter."""

from __future__ import annotations

import pytest

from ipyagent.agentlib.errors import ProtocolError
from ipyagent.agentlib.providers._sse import NDJSONDecoder, SSEDecoder, SSEEvent
from ipyagent.agentlib.providers._think_tags import ThinkTagSplitter


def feed_all(decoder: SSEDecoder, *pieces: bytes) -> list[SSEEvent]:
    events = [e for piece in pieces for e in decoder.feed(piece)]
    return events + decoder.close()


def test_sse_fields_comments_and_multiline_data() -> None:
    data = b": OPENROUTER PROCESSING\n\nevent: error\nid: 7\nretry: 10\ndata: a\ndata:b\n\ndata: [DONE]\n\n"
    assert feed_all(SSEDecoder(), data) == [
        SSEEvent(data="a\nb", event="error", id="7"),
        SSEEvent(data="[DONE]", event="message", id="7"),
    ]


def test_sse_crlf_split_between_cr_and_lf_and_utf8_split() -> None:
    text = "data: héllo\r\n\r\n".encode()
    cut = text.index(b"\xa9")  # inside the two bytes of "é"
    pieces = [text[:cut], text[cut : text.index(b"\n")], text[text.index(b"\n") :]]
    assert feed_all(SSEDecoder(), *pieces) == [SSEEvent(data="héllo")]


def test_sse_bom_and_missing_final_blank_line() -> None:
    assert feed_all(SSEDecoder(), b"\xef\xbb\xbfdata: [DONE]\n") == [SSEEvent(data="[DONE]")]


def test_sse_half_line_at_end_is_dropped() -> None:
    assert feed_all(SSEDecoder(), b'data: {"a": 1}\n\ndata: {"b') == [SSEEvent(data='{"a": 1}')]


def test_invalid_utf8_and_endless_line() -> None:
    with pytest.raises(ProtocolError, match="UTF-8"):
        SSEDecoder().feed(b"data: \xff\n\n")
    with pytest.raises(ProtocolError, match="UTF-8"):
        feed_all(SSEDecoder(), b"data: \xc3")
    with pytest.raises(ProtocolError, match="longer than"):
        SSEDecoder(max_line=100).feed(b"x" * 101)


def test_ndjson_lines() -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed(b'{"a":1}\n\n{"b"') == ['{"a":1}']
    assert decoder.feed(b":2}\r\n") == ['{"b":2}']
    assert decoder.feed(b'{"c":') == []
    assert decoder.close() == []  # a line cut by the end of the stream is not delivered


@pytest.mark.parametrize(
    ("pieces", "thinking", "text"),
    [
        (["<think>a</think>b"], "a", "b"),
        (["<", "thi", "nk>", "abc</", "think", ">", "\n\n", "answer"], "abc", "answer"),
        (["  \n<think>x</think>  y"], "x", "y"),
        (["no tags here"], "", "no tags here"),
        (["code: <think>x</think>"], "", "code: <think>x</think>"),  # not at the start: left alone
        (["<think>still thinking"], "still thinking", ""),  # cut off before the close tag
        (["<thi"], "", "<thi"),
        (["<think>a</th"], "a</th", ""),
        (["<think></think>", "B <think>"], "", "B <think>"),
    ],
)
def test_think_splitter(pieces: list[str], thinking: str, text: str) -> None:
    splitter = ThinkTagSplitter()
    out = [p for piece in pieces for p in splitter.feed(piece)] + splitter.flush()
    assert "".join(t for k, t in out if k == "thinking") == thinking
    assert "".join(t for k, t in out if k == "text") == text
    assert all(t for _, t in out)  # no empty pieces
