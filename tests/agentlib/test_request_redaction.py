"""The built-in redaction: secrets are masked in what is sent to the model, on by default; the
conversation keeps what was written."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipyagent import Agent, tool
from ipyagent.agentlib.messages import Message, TextBlock, ThinkingBlock
from ipyagent.agentlib.model import ModelRequest
from ipyagent.agentlib.redact import mask_secrets
from ipyagent.agentlib.request_redaction import RequestRedactor
from ipyagent.testing import ScriptedModel, tool_call

TEAM_KEY = "team-k3y-9f8e7d6c5b4a"  # the value of a key-like variable: known, whatever its shape
SHAPES = [
    "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12",
    "sk-ant-api03-Zz99Yy88Xx77Ww66Vv55Uu44",
    "ghp_0123456789abcdefABCDEF0123456789abcd",
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-123456789012-abcdefghij",
    # Made-up samples in each vendor's documented shape (none of them is or was a real key).
    "pypi-AgEIcHlwaS5vcmcCJGQ0ZjM2YjE2LTk5ZTMtNDQ5ZS1iY2Y3LTg3YjA0YjI2NjdiOAACKlszLCI2ZmRkZDZkNi04YjQ4",
    "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",
    "xai-PoT0HjgzWt6VY7cXRHfkDTjqIdl9PaCXjw4KKAetC30DwaxkYqlEw4HdHpknWVFJfvvWdzvOhtqYJSSf",
    "npm_tDDsGhLb6sn4XEJI59RhaLdxZmsSN2gcJBAV",
    # A JWT: base64url header, payload and signature (an HS256 header, a made-up payload).
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c2VyLTQyIiwiZXhwIjoxOTAwMDAwMDAwfQ"
    ".6axTbyDWyQXiSfxikLDr79nDVJd-uN7B3MAtQhDp8kF",
]
PGP_BLOCK = """-----BEGIN PGP PRIVATE KEY BLOCK-----

lQOYBGXt3xYBCADL3qKcFkA0zSy/aFQKX+MZ4xlxj2cw47uoashhUgSze2akwvCt
+KnDrCD/sLn2mvlgcXpysjedl1TO+ojXhg5cOOwVHeR7hjI4Tn2Y3YSMFFkc6T8r
faxMOAt0DIP8rQHZKwu/kDA/W0xaCZL5F74//E2o7qyPZqqEYtLrRSHc3sjFrt7f
=q8Yd
-----END PGP PRIVATE KEY BLOCK-----"""
ORDINARY = [
    "task-list-for-the-week-2024-and-beyond",
    "the disk-usage-report-2024-01-01-final",
    "AKIAS are not keys",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "see https://docs.python.org/3/library/re.html",
    # Words that share a prefix with a token kind.
    "model xai-grok-2-latest",
    "npm_config_cache and gsk_model and pypi-simple-index",
    "the header eyJhbGciOiJIUzI1NiJ9 alone",
    "-----BEGIN PGP PUBLIC KEY BLOCK-----\nmQENBGXt3xYBCADL\n-----END PGP PUBLIC KEY BLOCK-----",
]


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    config = tmp_path / "config.toml"
    monkeypatch.setenv("IPYAGENT_CONFIG", str(config))
    monkeypatch.setenv("TEAM_API_KEY", TEAM_KEY)
    return config


def write(path: Path, text: str) -> None:
    path.write_text(text)


@pytest.mark.parametrize("secret", SHAPES)
def test_credential_shapes_are_masked(secret: str) -> None:
    assert mask_secrets(f"use {secret} here", []) == "use [redacted] here"


def test_a_pgp_private_key_block_is_masked_whole() -> None:
    masked = mask_secrets(f"exported:\n{PGP_BLOCK}\ndone", [])
    assert masked == "exported:\n[redacted]\ndone"
    # Cut off before its end (a capped tool result): everything after the header goes.
    assert mask_secrets(f"exported:\n{PGP_BLOCK[:120]}", []) == "exported:\n[redacted]"


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert mask_secrets(text, []) is text


@tool(read_only=True)
def read_env(hint: str = "") -> str:
    """Show the environment."""
    return f"TOKEN={SHAPES[0]}"


async def test_requests_are_masked_by_default_and_the_conversation_keeps_the_original() -> None:
    model = ScriptedModel([tool_call("read_env", {"hint": SHAPES[2]}), "ok"])
    agent = Agent(model=model, tools=[read_env], system=f"Deploy with {SHAPES[1]}.")
    prompt = f"My key is {TEAM_KEY} and my token {SHAPES[3]}."
    result = await agent.run(prompt)
    assert result.status == "completed"
    first, second = model.requests
    assert first.system == "Deploy with [redacted]."
    assert first.messages[-1].text == "My key is [redacted] and my token [redacted]."
    call = second.messages[1].tool_calls[0]
    assert call.arguments == {"hint": "[redacted]"} and SHAPES[2] not in call.raw_arguments
    assert second.messages[2].tool_results[0].content == "TOKEN=[redacted]"
    sent = "".join(r.model_dump_json() for r in model.requests)
    for secret in (TEAM_KEY, *SHAPES[:4]):
        assert secret not in sent
    # What the user wrote stays as written in the conversation.
    assert agent.messages[0].text == prompt


async def test_redaction_can_be_turned_off_per_agent_and_in_the_config_file(isolated: Path) -> None:
    prompt = f"My token {SHAPES[0]}"
    model = ScriptedModel(["ok"])
    await Agent(model=model, redact_requests=False).run(prompt)
    assert model.requests[0].messages[-1].text == prompt

    write(isolated, "redact_requests = false\n")
    model = ScriptedModel(["ok"])
    agent = Agent(model=model)
    assert agent.redact_requests is False
    await agent.run(prompt)
    assert model.requests[0].messages[-1].text == prompt
    # An agent's own choice wins over the file's.
    model = ScriptedModel(["ok"])
    await Agent(model=model, redact_requests=True).run(prompt)
    assert model.requests[0].messages[-1].text == "My token [redacted]"


def test_a_config_value_that_is_not_a_boolean_is_refused(isolated: Path) -> None:
    from ipyagent import UserError

    isolated.write_text('redact_requests = "no"\n')
    with pytest.raises(UserError, match="redact_requests"):
        Agent(model=ScriptedModel(["ok"]))


def test_signed_thinking_goes_back_untouched_and_unchanged_requests_are_the_same_object() -> None:
    redactor = RequestRedactor()
    signed = ThinkingBlock(text=f"the key {SHAPES[0]}", signature="sig")
    request = ModelRequest(
        model="m",
        messages=[
            Message.user("hello"),
            Message(role="assistant", content=(signed, TextBlock(text=f"key {SHAPES[0]}"))),
        ],
    )
    masked = redactor(request)
    assert masked.messages[1].content[0] is signed
    assert masked.messages[1].text == "key [redacted]"
    assert masked.messages[0] is request.messages[0]
    plain = ModelRequest(model="m", messages=[Message.user("hello")])
    assert redactor(plain) is plain
    # A message seen before is not scanned again: its masked copy is reused.
    again = redactor(request)
    assert again.messages[1] is masked.messages[1]


async def test_a_recorded_cassette_holds_the_masked_request(tmp_path: Path) -> None:
    from ipyagent.agentlib.providers.replay import ReplayModel

    cassette = tmp_path / "run.cassette.jsonl"
    inner = ScriptedModel(["ok"])
    prompt = f"Deploy with {SHAPES[0]} and {SHAPES[2]}"
    await Agent(model=ReplayModel(inner, cassette=cassette, mode="record")).run(prompt)
    recorded = read(cassette)
    assert SHAPES[0] not in recorded and SHAPES[2] not in recorded
    assert "Deploy with [redacted] and [redacted]" in recorded
    assert inner.requests[0].messages[-1].text == "Deploy with [redacted] and [redacted]"
    # And it replays: the live request is masked the same way.
    replayed = await Agent(model=ReplayModel(cassette=cassette)).run(prompt)
    assert replayed.text == "ok"


@pytest.mark.parametrize("secret", ['pa"ss-w0rd-42', "C:\\keys\\deploy-7f3a", 'q\\u"\\x\tz-99-key'])
async def test_a_known_secret_is_masked_in_its_escaped_forms(
    secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import os

    # json.dumps(os.environ) and print(os.environ) write the value escaped: \" and \\.
    monkeypatch.setenv("DB_PASSWORD", secret)

    @tool(read_only=True)
    def dump_env() -> str:
        """Show the environment."""
        return json.dumps(dict(os.environ)) + "\n" + repr(dict(os.environ))

    model = ScriptedModel([tool_call("dump_env", {}), "ok"])
    await Agent(model=model, tools=[dump_env]).run(f"the password is {json.dumps(secret)}")
    sent = "".join(r.model_dump_json() for r in model.requests)
    result = model.requests[1].messages[2].tool_results[0].content
    assert '"DB_PASSWORD": "[redacted]"' in result and "'DB_PASSWORD': '[redacted]'" in result
    for form in (secret, json.dumps(secret)[1:-1], repr(secret)[1:-1]):
        assert form not in result
        assert form not in sent


def read(path: Path) -> str:
    return path.read_text()


def test_each_request_looks_only_at_the_messages_added_since_the_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The transcript is resent every turn: looking at every message of it, every turn, made a
    # long conversation's redaction quadratic.
    visited: list[Message] = []
    look = RequestRedactor._message

    def counting(self: RequestRedactor, message: Message) -> Message:
        visited.append(message)
        return look(self, message)

    monkeypatch.setattr(RequestRedactor, "_message", counting)
    redactor = RequestRedactor()
    messages: list[Message] = []
    for turn in range(200):
        messages += [Message.user(f"turn {turn} with {SHAPES[0]}"), Message.user(f"reply {turn}")]
        masked = redactor(ModelRequest(model="m", messages=list(messages)))
        assert masked.messages[-2].text == f"turn {turn} with [redacted]"
    assert len(visited) == 400
    # A transcript that changed in the middle (a compaction) is looked at again, message by
    # message; what was masked before is reused.
    compacted = [Message.user("summary"), *messages[-4:]]
    masked = redactor(ModelRequest(model="m", messages=compacted))
    assert [m.text for m in masked.messages][1] == "turn 198 with [redacted]"
    assert masked.messages[1] is redactor(ModelRequest(model="m", messages=compacted)).messages[1]
