"""What IPython does not keep about the cells run in a kernel: which ones failed, and how."""

from __future__ import annotations

from typing import Any

__all__ = ["History"]


class History:
    """Registered as a ``post_run_cell`` hook by the extension."""

    def __init__(self) -> None:
        self.errors: dict[int, str] = {}

    def post_run_cell(self, result: Any) -> None:
        error = result.error_in_exec or result.error_before_exec
        count = result.execution_count
        if error is not None and count is not None:
            self.errors[count] = f"{type(error).__name__}: {error}"
