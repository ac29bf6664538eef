"""``{var}`` in prompts, where the kernel's notebook is, and where its conversations are kept."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipyagent.agentlib.errors import UserError
from ipyagent.kernel.interpolate import interpolate
from ipyagent.kernel.notebook_path import find_notebook, former_sessions, session_file


class Unprintable:
    def __format__(self, spec: str) -> str:
        raise RuntimeError("no format for you")


NAMESPACE: dict[str, Any] = {
    "x": 5,
    "pi": math.pi,
    "name": "north",
    "items": ["first", "second"],
    "table": {"key": "value"},
    "df": pd.DataFrame({"a": [1, 2, 3], "b": [4, 5, 6]}),
    "odd": Unprintable(),
}

# -- interpolate ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x is {x}", "x is 5"),
        ("shape {df.shape}", "shape (3, 2)"),
        ("first: {items[0]}", "first: first"),
        ("{table[key]}", "value"),
        ("{pi:.2f}", "3.14"),
        ("{name!r}", "'north'"),
        ("{x}{x}", "55"),
        ("{{literal}}", "{literal}"),
        ("{{x}} is {x}", "{x} is 5"),
        ("}}{{", "}{"),
    ],
)
def test_fields_resolve_like_str_format(text: str, expected: str) -> None:
    assert interpolate(text, NAMESPACE) == expected


@pytest.mark.parametrize(
    "text",
    [
        "{missing}",
        "{x.nope}",
        "{items[9]}",
        "{odd}",
        "{x:%%bad}",
        '{"a": 1}',
        "payload = {'a': 1, 'b': [1, 2]}",
        "a set {x, name}",
        "{ x }",
        "{}",
        "f(x) = {x",
        "x}",
        "{",
        "}",
        "def f():\n    return {1: 2}",
    ],
)
def test_what_does_not_resolve_is_kept_as_written(text: str) -> None:
    assert interpolate(text, NAMESPACE) == text


def test_known_and_unknown_fields_mix() -> None:
    assert interpolate('Use {x} rows of {missing} as {"json": true}', NAMESPACE) == (
        'Use 5 rows of {missing} as {"json": true}'
    )


@settings(database=None)
@given(st.text())
def test_any_text_interpolates_without_raising(text: str) -> None:
    assert isinstance(interpolate(text, NAMESPACE), str)


@settings(database=None)
@given(st.text(alphabet=st.sampled_from("{}[]!:.x_ab0 '\"\n")))
def test_any_brace_soup_interpolates_without_raising(text: str) -> None:
    assert isinstance(interpolate(text, NAMESPACE), str)


@settings(database=None)
@given(st.text())
def test_doubled_braces_always_come_back_as_written(text: str) -> None:
    escaped = text.replace("{", "{{").replace("}", "}}")
    assert interpolate(escaped, NAMESPACE) == text


@settings(database=None)
@given(st.text().filter(lambda t: "{" not in t and "}" not in t))
def test_text_without_braces_is_unchanged(text: str) -> None:
    assert interpolate(text, NAMESPACE) == text


# -- find_notebook -------------------------------------------------------------------------------


class ShellWithSession:
    """What find_notebook reads of a shell: ipykernel's ``__session__`` in the user namespace."""

    def __init__(self, session: str | None) -> None:
        self.user_ns: dict[str, Any] = {} if session is None else {"__session__": session}


@pytest.fixture
def no_session(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    return monkeypatch


def test_an_absolute_session_name_is_the_notebook(no_session: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "project" / "analysis.ipynb"
    no_session.setenv("JPY_SESSION_NAME", str(path))
    assert find_notebook() == path


def test_a_relative_session_name_resolves_against_the_working_directory(
    no_session: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "q3.ipynb").write_text("{}")
    no_session.chdir(tmp_path)
    no_session.setenv("JPY_SESSION_NAME", "reports/q3.ipynb")
    assert find_notebook() == (tmp_path / "reports" / "q3.ipynb").resolve()


def test_a_path_relative_to_the_server_root_finds_the_notebook_in_the_kernels_folder(
    no_session: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Older servers give the path from their root; the kernel itself runs in the notebook's folder.
    (tmp_path / "q3.ipynb").write_text("{}")
    no_session.chdir(tmp_path)
    no_session.setenv("JPY_SESSION_NAME", "reports/q3.ipynb")
    assert find_notebook() == (tmp_path / "q3.ipynb").resolve()


def test_an_unsaved_relative_notebook_is_assumed_in_the_working_directory(
    no_session: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    no_session.chdir(tmp_path)
    no_session.setenv("JPY_SESSION_NAME", "Untitled.ipynb")
    assert find_notebook() == (tmp_path / "Untitled.ipynb").resolve()


@pytest.mark.parametrize("name", ["console-1", "script.py", "notes.ipynb.txt", ""])
def test_names_that_are_not_notebooks_are_ignored(no_session: pytest.MonkeyPatch, name: str) -> None:
    no_session.setenv("JPY_SESSION_NAME", name)
    assert find_notebook() is None
    assert find_notebook(ShellWithSession(name)) is None


def test_without_a_session_name_there_is_no_notebook(no_session: pytest.MonkeyPatch) -> None:
    assert find_notebook() is None
    assert find_notebook(ShellWithSession(None)) is None


def test_the_kernels_session_variable_is_used_when_the_environment_says_nothing(
    no_session: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "analysis.ipynb"
    assert find_notebook(ShellWithSession(str(path))) == path


def test_the_environment_wins_over_the_session_variable(
    no_session: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    no_session.setenv("JPY_SESSION_NAME", str(tmp_path / "from_env.ipynb"))
    assert find_notebook(ShellWithSession(str(tmp_path / "from_ns.ipynb"))) == tmp_path / "from_env.ipynb"


# -- session_file --------------------------------------------------------------------------------


def test_the_default_session_sits_beside_the_notebook(tmp_path: Path) -> None:
    notebook = tmp_path / "analysis.ipynb"
    assert session_file(notebook) == tmp_path / "analysis.agent.jsonl"


def test_a_named_session_gets_its_own_file(tmp_path: Path) -> None:
    notebook = tmp_path / "analysis.ipynb"
    assert session_file(notebook, "eda") == tmp_path / "analysis.eda.agent.jsonl"
    assert session_file(notebook, "v1.2_final-b") == tmp_path / "analysis.v1.2_final-b.agent.jsonl"


@pytest.mark.parametrize("as_str", [True, False])
def test_session_dir_overrides_the_folder(tmp_path: Path, as_str: bool) -> None:
    folder = tmp_path / "conversations"
    session_dir = str(folder) if as_str else folder
    notebook = tmp_path / "work" / "analysis.ipynb"
    assert session_file(notebook, session_dir=session_dir) == folder / "analysis.agent.jsonl"
    assert session_file(notebook, "eda", session_dir=session_dir) == folder / "analysis.eda.agent.jsonl"
    assert session_file(None, session_dir=session_dir) == folder / "ipyagent.agent.jsonl"


def test_without_a_notebook_sessions_go_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert session_file(None) == tmp_path / "ipyagent.agent.jsonl"
    assert session_file(None, "eda") == tmp_path / "ipyagent.eda.agent.jsonl"


@pytest.mark.parametrize(
    "name", ["", "../escape", "a/b", "a\\b", ".hidden", "-flag", "two words", "x" * 65, "café"]
)
def test_invalid_session_names_are_a_user_error(tmp_path: Path, name: str) -> None:
    with pytest.raises(UserError, match="is not allowed") as caught:
        session_file(tmp_path / "analysis.ipynb", name)
    assert caught.value.code == "invalid_session_name"
    assert "--session eda" in caught.value.hint


def test_a_session_file_of_the_folder_by_its_name(tmp_path: Path) -> None:
    assert session_file(tmp_path / "new.ipynb", "old.agent.jsonl") == tmp_path / "old.agent.jsonl"


def test_former_sessions_are_those_of_notebooks_that_no_longer_exist(tmp_path: Path) -> None:
    def header(file: str, notebook: str | None) -> None:
        line = {"type": "session", "format": "ipyagent.session", "version": 1, "notebook": notebook}
        (tmp_path / file).write_text(json.dumps(line) + "\n")

    (tmp_path / "kept.ipynb").write_text("{}")
    header("gone.agent.jsonl", str(tmp_path / "gone.ipynb"))
    header("gone.eda.agent.jsonl", "gone.ipynb")  # a relative name: in the same folder
    header("kept.agent.jsonl", str(tmp_path / "kept.ipynb"))
    header("loose.agent.jsonl", None)
    (tmp_path / "broken.agent.jsonl").write_bytes(b"\x00\x01")
    found = former_sessions(tmp_path / "new.ipynb", tmp_path)
    assert sorted((f.name, name) for f, name in found) == [
        ("gone.agent.jsonl", "gone.ipynb"),
        ("gone.eda.agent.jsonl", "gone.ipynb"),
    ]
