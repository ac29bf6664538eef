"""The IPython/Jupyter integration: the extension, the magics, the in-kernel runner and the
tools that act on the kernel's namespace, the notebook and the workspace's files.

Imported only when IPython loads the extension (``%load_ext ipyagent``); ``import ipyagent``
never imports this package.

``hooks`` are the hooks of every ``%%agent`` conversation in the kernel (each conversation's own
hooks include them, and they run first)::

    from ipyagent import Block, BlockToolCall, Pass
    from ipyagent.kernel import hooks

    @hooks.before_tool_call
    def no_big_orders(call):
        if call.name == "place_order" and call.arguments["quantity"] > 10:
            raise BlockToolCall("Orders above 10 need a manager's approval.")

    @hooks.model_policy          # Pass() or Block(...) before every request; fails closed
    def no_project_names(request):
        return Block("Project names stay here.") if "Falcon" in request.messages[-1].text else Pass()

(see ``docs/policy-hooks.md``). ``plugins`` are the plugins of every ``%%agent`` conversation
(``plugins.register(MyPlugin())``; see ``docs/plugins.md``).
"""

from typing import Any

__all__ = ["hooks", "plugins"]


def __getattr__(name: str) -> Any:
    # ``from ipyagent.kernel import hooks``: built on first use, so that loading the extension
    # does not load the agent core.
    if name == "hooks":
        from .state import kernel_hooks

        return kernel_hooks()
    if name == "plugins":
        from .state import kernel_plugins

        return kernel_plugins()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
