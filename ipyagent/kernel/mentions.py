"""``@name`` in a chat message: the variable ``name`` of the user's namespace goes with the
message as a summary (what ``describe_variable`` would tell the model: type, shape, a
DataFrame's columns, dtypes and first rows), so the model need not ask for it.

Only names of the namespace count, as whole words after an ``@`` that does not follow a letter
or a dot: "@sales" attaches ``sales``; "user@example.com", "@decorator" of an unknown name and
"@@" do not. Each variable is attached once per message, at most :data:`MAX_MENTIONS` of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..agentlib.messages import TextBlock
from .tools.python import cap, describe

__all__ = ["MAX_MENTIONS", "mentioned_variables"]

MAX_MENTIONS = 8
_MENTION = re.compile(r"(?<![\w.@])@([A-Za-z_]\w*)")


def mentioned_variables(text: str, namespace: Mapping[str, Any]) -> list[TextBlock]:
    """A summary block for each variable of ``namespace`` that ``text`` mentions as ``@name``."""
    names = [n for n in dict.fromkeys(_MENTION.findall(text)) if n in namespace and not n.startswith("_")]
    blocks = []
    for name in names[:MAX_MENTIONS]:
        summary = cap(describe(namespace[name], name))
        text = f'<variable name="{name}">\n{summary}\n</variable>'
        blocks.append(TextBlock(text=text, attached=f"@{name}"))
    return blocks
