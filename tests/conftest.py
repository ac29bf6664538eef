"""Puts this folder on sys.path (pytest's rootdir conftest), so tests can `import helpers`; keeps
the local model's prompt openings of every test (and of the kernels tests start) out of the
user's cache folder."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from ipyagent.agentlib.local_models import ENV_PROMPT_CACHE


@pytest.fixture(scope="session", autouse=True)
def _prompt_openings_in_a_temporary_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    before = os.environ.get(ENV_PROMPT_CACHE)
    os.environ[ENV_PROMPT_CACHE] = str(tmp_path_factory.mktemp("prompt-openings"))
    yield
    if before is None:
        os.environ.pop(ENV_PROMPT_CACHE, None)
    else:
        os.environ[ENV_PROMPT_CACHE] = before
