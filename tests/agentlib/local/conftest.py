"""Fixtures of the local-model tests: the backend, the tiny random GGUF, and the real default model.

Every test that takes ``tiny_gguf`` or ``default_gguf`` runs once per installed backend
(``xllamacpp`` and ``llama_cpp``): the ``backend`` fixture sets ``$IPYAGENT_LOCAL_BACKEND``,
which every :class:`LocalModel` that names no backend follows (subprocesses inherit it too).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipyagent.agentlib.providers.local_backend import BACKENDS, ENV_BACKEND


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """The backend a test runs on (skips when it is not installed)."""
    name: str = request.param
    if importlib.util.find_spec(name) is None:
        hint = "pip install 'ipyagent[local]'" if name == "xllamacpp" else "scripts/install-llama-cpp.sh"
        pytest.skip(f"{name} is not installed ({hint})")
    before = os.environ.get(ENV_BACKEND)
    os.environ[ENV_BACKEND] = name
    yield name
    if before is None:
        os.environ.pop(ENV_BACKEND, None)
    else:
        os.environ[ENV_BACKEND] = before


@pytest.fixture(scope="session")
def backend_impl(backend: str) -> Any:
    """The module that runs ``backend`` (``_local_xllama`` or ``_local_llama``)."""
    from ipyagent.agentlib.providers.local import _impl

    return _impl(backend)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def _tiny_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("gguf", reason="the gguf package is not installed (pip install 'ipyagent[local]')")
    from tiny_gguf import write_tiny_gguf

    return write_tiny_gguf(tmp_path_factory.mktemp("tiny") / "tiny.gguf")


@pytest.fixture(scope="session")
def tiny_gguf(backend: str, _tiny_file: Path) -> Path:
    """A tiny random-weight model (needs a backend and gguf: the `local` extra)."""
    return _tiny_file


@pytest.fixture(scope="session")
def _default_file() -> Path:
    from ipyagent.agentlib.local_models import DEFAULT_MODELS, KNOWN_MODELS, _installed, prepare_known_model

    model = KNOWN_MODELS[DEFAULT_MODELS[0]]
    if not _installed(model):
        pytest.skip(f"the default local model's weight packages are not installed: {model.pip_command}")
    return prepare_known_model(model)


@pytest.fixture(scope="session")
def default_gguf(backend: str, _default_file: Path) -> Path:
    """The real default local model, joined and verified (skips when its packages are absent)."""
    return _default_file


@pytest.fixture(scope="session")
def check_grammar(backend: str, tiny_gguf: Path) -> Any:
    """Checks that the backend accepts a grammar: llama_cpp compiles GBNF; xllamacpp's server
    refuses a bad GBNF grammar, and llguidance (when installed) validates a ``%llguidance`` one,
    which the server would otherwise ignore."""

    def check(grammar: str) -> None:
        if backend == "llama_cpp":
            import llama_cpp

            llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)
            return
        if grammar.startswith("%llguidance"):
            llguidance = pytest.importorskip("llguidance")
            error, warnings = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
            assert not error and not warnings, warnings
        from ipyagent.agentlib.providers._local_xllama import load

        server = load(tiny_gguf, 1024, None).server
        reply = server.handle_completions({"prompt": [3], "n_predict": 2, "grammar": grammar})
        assert "error" not in reply, reply

    return check
