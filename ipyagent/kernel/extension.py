"""``%load_ext ipyagent``: register the magics and the hooks; ``%unload_ext`` removes them."""

from __future__ import annotations

from typing import Any

from .magics import AgentMagics
from .state import KernelState

__all__ = ["kernel_state", "load_ipython_extension", "run_summary", "unload_ipython_extension"]

_STATES: dict[int, KernelState] = {}


def load_ipython_extension(ipython: Any) -> None:
    if id(ipython) in _STATES:
        return
    state = KernelState(shell=ipython)
    _STATES[id(ipython)] = state
    ipython.events.register("post_run_cell", state.history.post_run_cell)
    ipython.register_magics(AgentMagics(ipython, state=state))
    state.live.open()


def unload_ipython_extension(ipython: Any) -> None:
    state = _STATES.pop(id(ipython), None)
    if state is None:
        return
    ipython.events.unregister("post_run_cell", state.history.post_run_cell)
    magics = ipython.magics_manager.registry.pop("AgentMagics", None)
    if magics is not None:
        ipython.magics_manager.magics["cell"].pop("agent", None)
        ipython.magics_manager.magics["line"].pop("agent", None)
    state.close()


def kernel_state(ipython: Any) -> KernelState | None:
    """What the extension keeps for ``ipython``, or None when it is not loaded there."""
    return _STATES.get(id(ipython))


def run_summary() -> str:
    """JSON for ``python -m ipyagent run``: the models this kernel's runs used, and whether they
    were recorded or replayed. Asked of the kernel after its notebook's last cell."""
    import json

    from .cassettes import replay_mode

    models = [m for state in _STATES.values() for m in state.models_used]
    return json.dumps({"models": list(dict.fromkeys(models)), "replay": replay_mode().mode})
