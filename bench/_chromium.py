"""Shared by the browser benchmarks: Debian's Chromium and the flags that work as root on a
closed network (shared/reference/jupyter-testing.md; tests/browser/conftest.py uses the same)."""

from __future__ import annotations

import shutil

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
