"""Fixtures of the local-model tests: the tiny random GGUF, and the real default model."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight model (needs llama-cpp-python and gguf: the `local` extra)."""
    pytest.importorskip(
        "llama_cpp", reason="llama-cpp-python is not installed (scripts/install-llama-cpp.sh)"
    )
    pytest.importorskip("gguf", reason="the gguf package is not installed (pip install 'ipyagent[local]')")
    from tiny_gguf import write_tiny_gguf

    return write_tiny_gguf(tmp_path_factory.mktemp("tiny") / "tiny.gguf")


@pytest.fixture(scope="session")
def default_gguf() -> Path:
    """The real default local model, joined and verified (skips when its packages are absent)."""
    pytest.importorskip(
        "llama_cpp", reason="llama-cpp-python is not installed (scripts/install-llama-cpp.sh)"
    )
    from ipyagent.agentlib.local_models import DEFAULT_MODELS, KNOWN_MODELS, _installed, prepare_known_model

    model = KNOWN_MODELS[DEFAULT_MODELS[0]]
    if not _installed(model):
        pytest.skip(f"the default local model's weight packages are not installed: {model.pip_command}")
    return prepare_known_model(model)
