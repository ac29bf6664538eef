"""The secret set is computed once and again only when what it is made of changes: the
environment, the config file, the endpoints registered in code. Asked three times a round by the
loop, it was most of the loop's own cost when each call walked the whole environment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipyagent.agentlib import config_file, endpoints, redact

KEY = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2"


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[int]]:
    """How many times the set was computed from its sources, with a config file of its own."""
    monkeypatch.setenv("IPYAGENT_CONFIG", str(tmp_path / "config.toml"))
    calls: list[int] = []
    real = redact._compute

    def counting(env: Any) -> list[str]:
        calls.append(1)
        return real(env)

    monkeypatch.setattr(redact, "_compute", counting)
    yield calls
    endpoints.unregister_all_endpoints()


def test_asking_again_computes_nothing_while_nothing_changed(computed: list[int]) -> None:
    first = redact.known_secrets()
    for _ in range(100):
        assert redact.known_secrets() == first
    assert len(computed) <= 1


def test_a_variable_set_in_the_environment_is_known_at_once(
    computed: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    redact.known_secrets()
    monkeypatch.setenv("SOME_SERVICE_TOKEN", KEY)
    assert KEY in redact.known_secrets()
    monkeypatch.delenv("SOME_SERVICE_TOKEN")
    assert KEY not in redact.known_secrets()


def test_a_key_written_in_the_config_file_is_known_at_once(computed: list[int], tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    placeholder = "x" * len(KEY)
    config.write_text(
        f'[endpoints.gw]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "{placeholder}"\n'
    )
    assert KEY not in redact.known_secrets()
    # The same size, written at once: a modification time may not tell these apart.
    config.write_text(
        f'[endpoints.gw]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "{KEY}"\n'
    )
    assert KEY in redact.known_secrets()


def test_an_endpoint_registered_in_code_is_known_at_once(computed: list[int]) -> None:
    redact.known_secrets()
    endpoints.register_endpoint("gateway", kind="openai", base_url=f"http://127.0.0.1:9/{KEY}/v1")
    assert KEY in redact.known_secrets()
    endpoints.unregister_endpoint("gateway")
    assert KEY not in redact.known_secrets()


def test_the_config_file_is_parsed_again_only_when_its_bytes_change(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("budget = 1\n")
    first = config_file.read_config(path)
    assert config_file.read_config(path) is first  # not parsed again
    path.write_text("budget = 2\n")  # the same size, at once
    assert config_file.read_config(path) == {"budget": 2}
    path.unlink()
    assert config_file.read_config(path) == {}
