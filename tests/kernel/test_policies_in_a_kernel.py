"""The kernel's policies (``ipyagent.kernel.hooks``) apply to every %%agent run, and what a run
sends has its secrets masked, in a real kernel."""

from __future__ import annotations

from conftest import Kernel, text_of

SETUP = """
import os
os.environ["IPYAGENT_CONFIG"] = os.path.join(os.getcwd(), "no-config.toml")
os.environ["TEAM_API_KEY"] = "team-k3y-9f8e7d6c5b4a"
%load_ext ipyagent
from ipyagent import Block, Pass
from ipyagent.kernel import hooks
from ipyagent.testing import ScriptedModel, tool_call

@hooks.model_policy
def no_project_names(request):
    if "Project Falcon" in request.messages[-1].text:
        return Block("Internal project names may not be sent.", metadata={"reason": "Falcon"})
    return Pass()

@hooks.tool_policy
def no_deletes(call):
    if "os.remove" in call.arguments.get("code", ""):
        return Block("Deleting files is not allowed in this notebook.")
    return Pass()
"""


def test_the_kernels_policies_and_redaction_apply_to_agent_cells(kernel: Kernel) -> None:
    reply, outputs = kernel.run(SETUP + "m = ScriptedModel([])")
    assert reply["status"] == "ok", text_of(outputs)

    # A blocked request: the cell fails with the policy's message, and nothing is sent.
    reply, outputs = kernel.run("%%agent -m m --context none\nWhat is the budget of Project Falcon?")
    assert reply["status"] == "error"
    shown = text_of(outputs) + reply.get("evalue", "")
    assert "Internal project names may not be sent." in shown
    assert "policy_blocked" in shown
    assert "Falcon" not in shown.replace("Internal project names", "")
    _, outputs = kernel.run("print(len(m.requests))")
    assert text_of(outputs).strip() == "0"
    # The conversation has hooks of its own, which include the kernel's.
    _, outputs = kernel.run(
        "from ipyagent.kernel.extension import kernel_state\n"
        "[a] = kernel_state(get_ipython()).agents.values()\n"
        "print(a.hooks is hooks, a.hooks.include == [hooks] and a.hooks.include[0] is hooks)"
    )
    assert text_of(outputs).strip() == "False True"

    # A fresh conversation: a blocked tool call is refused and the run goes on; the key in the
    # prompt reaches the model masked.
    kernel.run(
        "m.add([tool_call('run_python', {'code': 'import os; os.remove(\"x\")'})], 'I may not delete it.')"
    )
    prompt = "Delete x; my key is team-k3y-9f8e7d6c5b4a and sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12"
    reply, outputs = kernel.run(f"%%agent -y -m m --new --context none\n{prompt}")
    assert reply["status"] == "ok", text_of(outputs)
    _, outputs = kernel.run(
        "print(m.requests[0].messages[-1].text)\nprint(m.requests[1].messages[-1].tool_results[0].content)"
    )
    assert text_of(outputs).strip().splitlines() == [
        "Delete x; my key is [redacted] and [redacted]",
        "Blocked by policy: Deleting files is not allowed in this notebook.",
    ]
