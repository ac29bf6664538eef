"""A key in the base URL (``http://user:KEY@host/v1``) is treated like the key itself: it reaches
the server as an Authorization header and nothing the agent produces shows it — errors, events,
the run result, the provider's repr, httpx's log, or the widget's patches."""

from __future__ import annotations

import json
import logging
import traceback
from typing import Any

import pytest
from wire_server import Reply, WireServer

from ipyagent import Agent
from ipyagent.agentlib.endpoints import get_endpoint, provider_for
from ipyagent.agentlib.errors import AgentError
from ipyagent.agentlib.events import EVENT_ADAPTER, AgentEvent
from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.model import ModelRequest
from ipyagent.agentlib.redact import redact_url
from ipyagent.agentlib.retry import RetryPolicy
from ipyagent.widgets.reducer import ViewReducer

KEY = "sk-URL-d0n7-l3ak-7h15-k3y-0123456789"

# endpoint: where its base URL puts the key (a {} stands for the server's address)
CASES = {
    "openai": "http://user:KEY@{}/v1",
    "anthropic": "http://user:KEY@{}",
    "ollama": "http://KEY@{}",
    "openai-query": "http://{}/v1?api-version=2024&api_key=KEY",
}


def _configure(monkeypatch: pytest.MonkeyPatch, tmp_path: Any, server: WireServer, template: str) -> str:
    url = template.replace("KEY", KEY).format(server.base_url.removeprefix("http://"))
    config = tmp_path / "config.toml"
    config.write_text(
        "".join(f'[endpoints.{name}]\nbase_url = "{url}"\n' for name in ("openai", "anthropic", "ollama"))
    )
    monkeypatch.setenv("IPYAGENT_CONFIG", str(config))
    # The URL holds the only key: no variable is set, so a hint naming one is not needed.
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(name, "unused-variable-key")
    return url


def _error_texts(err: BaseException) -> list[str]:
    texts = [str(err), repr(err), "".join(traceback.format_exception(err))]
    if isinstance(err, AgentError):
        texts += [err.info.model_dump_json(), err.hint]
    return texts


@pytest.mark.parametrize("endpoint_case", list(CASES))
async def test_url_credentials_reach_the_server_and_nothing_else(
    server: WireServer,
    endpoint_case: str,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx logs each request's URL at INFO
    _configure(monkeypatch, tmp_path, server, CASES[endpoint_case])
    endpoint = endpoint_case.split("-")[0]
    provider = provider_for(f"{endpoint}/some-model")
    produced = [repr(provider), str(provider), repr(vars(provider)), repr(get_endpoint(endpoint))]

    # A 404 (its hint names the base URL), a 401 echoing the key, a refused connection.
    server.queue(
        Reply(b'{"error": {"message": "no such model"}}', 404, content_type="application/json"),
        Reply(json.dumps({"error": f"bad key {KEY}"}).encode(), 401, content_type="application/json"),
    )
    request = ModelRequest(model="some-model", messages=[Message.user("hi")])
    for _ in range(2):
        with pytest.raises(AgentError) as info:
            async for _event in provider.stream(request):
                pass
        produced += _error_texts(info.value)

    # The credentials went where they belong: a Basic Authorization header (httpx's reading of
    # a URL's userinfo), or the query string when that is where the URL had them.
    sent = server.requests[0]
    if "@" in CASES[endpoint_case]:
        assert sent.headers["authorization"].startswith("Basic ")
        assert KEY not in sent.path
    else:
        assert sent.path.endswith(f"/chat/completions?api-version=2024&api_key={KEY}")

    produced += [r.getMessage() for r in caplog.records] + [repr(r.args) for r in caplog.records]
    leaks = [text for text in produced if KEY in text]
    assert not leaks, leaks[:3]
    assert any("***" in text for text in produced)  # the echoed key was masked, not dropped


async def test_a_failed_run_shows_the_key_nowhere(
    server: WireServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    _configure(monkeypatch, tmp_path, server, CASES["openai"])
    server.queue(Reply(b'{"error": {"message": "no such model"}}', 404, content_type="application/json"))
    agent = Agent(model="openai/some-model", retry=RetryPolicy(attempts=1))
    events: list[AgentEvent] = []
    agent.on("*", events.append)
    result = await agent.run("hi")
    assert result.status == "failed" and result.error is not None
    assert result.error.code == "model_not_found"

    view = ViewReducer()
    for event in events:
        view.feed(event)
    patches = view.take()
    produced = [
        result.model_dump_json(),
        repr(result),
        str(result.error),
        *(EVENT_ADAPTER.dump_json(e).decode() for e in events),
        json.dumps(patches),
        json.dumps(view.state),
        *(r.getMessage() for r in caplog.records),
    ]
    leaks = [text for text in produced if KEY in text]
    assert not leaks, leaks[:3]
    # The hint still says which URL to check — without its credentials.
    assert f"base URL ({server.base_url}/v1)" in result.error.hint


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:pw-123456@host/v1", "https://***@host/v1"),
        ("https://sk-only-a-username@host/v1", "https://***@host/v1"),
        ("http://host:8080/v1?api_key=sk-123&x=1", "http://host:8080/v1?api_key=***&x=1"),
        ("http://host/v1?key=abc&token=def&model=m", "http://host/v1?key=***&token=***&model=m"),
        ("http://host/v1", "http://host/v1"),
        ("not a url", "not a url"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


async def test_a_custom_providers_own_exception_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    # Not translated by an adapter, so not masked there: the loop masks what it reports.
    monkeypatch.setenv("MY_SERVICE_TOKEN", KEY)

    class Custom:
        model_id = "custom/m"
        context_limit = None

        async def stream(self, request: ModelRequest) -> Any:
            raise RuntimeError(f"cannot reach http://me:{KEY}@proxy/v1 with token {KEY}")
            yield

    result = await Agent(model=Custom()).run("hi")
    assert result.error is not None and result.error.code == "unexpected_error"
    assert KEY not in result.model_dump_json()
    assert "http://***@proxy/v1" in result.error.message


# A key in the base URL's path (gateways that route by key) or in its fragment. Neither has a
# name that says "key", so the rule is: a value the base URL holds that looks like a key is a
# secret like the endpoint's key — masked in whatever shows the URL or echoes it.
PATH_KEY = "Zq8x7Vb2Lm4Np6Rt1Yw3Kc5Hf9Jd0Gs"
PATH_CASES = {
    "path": "http://{}/" + PATH_KEY + "/v1",
    "fragment": "http://{}/v1#token=" + PATH_KEY,
}


@pytest.mark.parametrize("case", list(PATH_CASES))
async def test_a_key_in_the_base_urls_path_or_fragment_is_shown_nowhere(
    server: WireServer,
    case: str,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from ipyagent.widgets.text import block_markdown, plain_text

    caplog.set_level(logging.DEBUG)
    url = PATH_CASES[case].format(server.base_url.removeprefix("http://"))
    config = tmp_path / "config.toml"
    config.write_text(f'[endpoints.gateway]\nkind = "openai"\nbase_url = "{url}"\nkey_required = false\n')
    monkeypatch.setenv("IPYAGENT_CONFIG", str(config))
    # The server answers 429, then 500, and says which URL it was asked for, as servers and
    # proxies do in their error pages.
    server.queue(
        Reply(
            json.dumps({"error": {"message": f"rate limited: {url}/chat/completions"}}).encode(),
            429,
            headers={"Retry-After": "0"},
            content_type="application/json",
        ),
        Reply(
            f"<h1>500</h1><p>POST {url}/chat/completions failed</p>".encode(), 500, content_type="text/html"
        ),
    )
    agent = Agent(model="gateway/some-model", retry=RetryPolicy(attempts=2))
    events: list[AgentEvent] = []
    agent.on("*", events.append)
    result = await agent.run("hi")
    assert result.status == "failed" and result.error is not None
    assert result.error.code == "provider_unavailable"
    warnings = [e for e in events if e.type == "run_warning"]
    assert [w.code for w in warnings] == ["retrying"]

    view = ViewReducer()
    for event in events:
        view.feed(event)
    patches = view.take()
    produced = [
        result.model_dump_json(),
        repr(result),
        str(result.error),
        *(EVENT_ADAPTER.dump_json(e).decode() for e in events),
        json.dumps(patches),
        json.dumps(view.state),
        plain_text(view.state),
        *(block_markdown(b, view.state["blocks"]) for b in view.state["blocks"]),
        repr(provider_for("gateway/some-model")),
        *(r.getMessage() for r in caplog.records),
    ]
    leaks = [text for text in produced if PATH_KEY in text]
    assert not leaks, leaks[:3]
    assert "***" in warnings[0].message and "***" in result.error.message  # masked, not dropped

    # The path is where the gateway reads its key: it is still sent there. A fragment never
    # reaches a server, so it is no part of the request (before, the request's own path went
    # after it and every request went to /v1).
    sent = [r.path for r in server.requests]
    if case == "path":
        assert sent == [f"/{PATH_KEY}/v1/chat/completions"] * 2
    else:
        assert sent == ["/v1/chat/completions"] * 2


async def test_a_refused_connection_does_not_show_a_key_in_the_path(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    config = tmp_path / "config.toml"
    config.write_text(
        f'[endpoints.gateway]\nkind = "openai"\nbase_url = "http://127.0.0.1:{port}/{PATH_KEY}/v1"\n'
        "key_required = false\n"
    )
    monkeypatch.setenv("IPYAGENT_CONFIG", str(config))
    result = await Agent(model="gateway/m", retry=RetryPolicy(attempts=1)).run("hi")
    assert result.error is not None and result.error.code == "connection_failed"
    assert PATH_KEY not in result.model_dump_json()
    assert f"http://127.0.0.1:{port}/***/v1" in result.error.message


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"https://gw.example/{PATH_KEY}/v1", "https://gw.example/***/v1"),
        (f"https://gw.example/v1#token={PATH_KEY}", "https://gw.example/v1#token=***"),
        (f"https://gw.example/v1#a=1&api_key={PATH_KEY}", "https://gw.example/v1#a=1&api_key=***"),
        (f"https://gw.example/v1#{PATH_KEY}", "https://gw.example/v1#***"),
        # A 32-digit hex id (an account, a gateway) in the path is masked too.
        ("https://gw.example/v1/0123456789abcdef0123456789abcdef/openai", "https://gw.example/v1/***/openai"),
        # What a base URL's path usually holds is left alone: versions, deployments, model names.
        (
            "https://r.openai.azure.com/openai/deployments/my-gpt4o-2024-08-06/chat?api-version=2024-06-01",
            "https://r.openai.azure.com/openai/deployments/my-gpt4o-2024-08-06/chat?api-version=2024-06-01",
        ),
        (
            "https://h.example/models/meta-llama/Meta-Llama-3.1-70B-Instruct/v1#section-2",
            "https://h.example/models/meta-llama/Meta-Llama-3.1-70B-Instruct/v1#section-2",
        ),
    ],
)
def test_redact_url_masks_keys_in_the_path_and_fragment(url: str, shown: str) -> None:
    assert redact_url(url) == shown
