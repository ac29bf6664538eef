"""%%agent in a real kernel (ipykernel via jupyter_client), driven by a scripted model."""

from __future__ import annotations

import time
from pathlib import Path

from conftest import Kernel, text_of

SETUP = """
%load_ext ipyagent
from ipyagent.testing import ScriptedModel, text, thinking, tool_call, pause
"""


def test_a_run_streams_into_the_cell_and_stores_its_result(kernel: Kernel) -> None:
    reply, _ = kernel.run(SETUP + "m = ScriptedModel([[thinking('Easy.'), text('The answer is 42.')]])")
    assert reply["status"] == "ok"
    reply, outputs = kernel.run("%%agent -m m -o res\nWhat is 6 * 7?")
    assert reply["status"] == "ok", reply
    shown = text_of(outputs)
    assert "The answer is 42." in shown
    assert "💭 Easy." in shown
    assert "using scripted/script" in shown
    reply, outputs = kernel.run("print(res.status, repr(res.text), m.requests[0].messages[-1].text)")
    assert text_of(outputs).strip() == "completed 'The answer is 42.' What is 6 * 7?"


def test_variables_are_interpolated_and_tools_see_the_users_namespace(kernel: Kernel) -> None:
    kernel.run(
        SETUP
        + "import pandas as pd\n"
        + "sales = pd.DataFrame({'region': ['north', 'south'], 'units': [3, 5]})\n"
        + "m = ScriptedModel([[tool_call('describe_variable', {'name': 'sales'})],"
        + " [tool_call('run_python', {'code': 'total = sales.units.sum()\\ntotal'})], 'Total is 8.'])"
    )
    reply, outputs = kernel.run("%%agent -y -m m\nSummarize {{the table}} `sales` ({sales.shape}).")
    assert reply["status"] == "ok", reply
    shown = text_of(outputs)
    assert '→ describe_variable(name="sales") ✓' in shown
    assert "→ run_python(" in shown
    assert "Total is 8." in shown
    _, outputs = kernel.run(
        "print(total); r = m.requests\n"
        "print(r[0].messages[0].text)\n"
        "print('units' in r[1].messages[-1].tool_results[0].content)\n"
        "print(r[2].messages[-1].tool_results[0].content)"
    )
    lines = text_of(outputs).strip().splitlines()
    assert lines[0] == "8"
    assert lines[1] == "Summarize {the table} `sales` ((2, 2))."
    assert lines[2] == "True"
    assert lines[3:] in (["[result]", "8"], ["[result]", "np.int64(8)"])  # numpy 2 reprs scalars so


def test_with_no_front_end_what_tools_displayed_is_kept_in_the_cell(kernel: Kernel) -> None:
    code = "import matplotlib\nmatplotlib.use('agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])"
    reply, _ = kernel.run(
        SETUP + f"m = ScriptedModel([tool_call('run_python', {{'code': {code!r}}}), 'Plotted.'])"
    )
    assert reply["status"] == "ok", reply
    reply, outputs = kernel.run("%%agent -y -m m\nplot it")
    assert reply["status"] == "ok", reply
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1, [sorted(o.get("data", {})) for o in outputs]
    assert outputs.index(images[0]) > max(i for i, o in enumerate(outputs) if "Plotted." in text_of([o]))


def test_headless_runs_deny_tools_that_change_things(kernel: Kernel) -> None:
    kernel.run(SETUP + "m = ScriptedModel([tool_call('run_python', {'code': 'hacked = 1'}), 'I could not.'])")
    reply, outputs = kernel.run("%%agent -m m\nset hacked")
    assert reply["status"] == "ok"
    shown = text_of(outputs)
    # With no front end to show the widget's buttons, the question is denied, and the model is told.
    assert "Denied: `run_python`" in shown
    assert "no one could answer" in shown or "nobody can answer" in shown
    _, outputs = kernel.run("print('hacked' in dir())")
    assert text_of(outputs).strip() == "False"


def test_a_failed_run_raises_in_the_cell_with_its_hint(kernel: Kernel) -> None:
    kernel.run(SETUP + "from ipyagent.agentlib.errors import AuthenticationError\n")
    kernel.run(
        "m = ScriptedModel([[error(AuthenticationError('Bad key.', hint='Set OPENAI_API_KEY.'))]])".replace(
            "error(", "__import__('ipyagent.testing').testing.error("
        )
    )
    reply, outputs = kernel.run("%%agent -m m\nhello")
    assert reply["status"] == "error"
    assert reply["ename"] == "AgentRunFailed"
    shown = text_of(outputs)
    assert "Bad key." in shown
    assert "Hint: Set OPENAI_API_KEY." in shown


def test_an_interrupt_cancels_the_run_and_the_conversation_goes_on(kernel: Kernel, jupyter_env: Path) -> None:
    kernel.run(SETUP + "m = ScriptedModel([[text('Thinking about it'), pause(60)], 'Second answer.'])")
    msg_id = kernel.send("%%agent -m m\nfirst")
    # Interrupt once the run is under way (its prompt is in the session file), not after a fixed
    # time: on a loaded machine the cell may still be setting up, where an interrupt is the
    # user's plain KeyboardInterrupt.
    deadline = time.monotonic() + 60
    while not any('"first"' in f.read_text() for f in jupyter_env.glob("*.agent.jsonl")):
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.05)
    time.sleep(0.5)  # the scripted reply reaches its pause
    started = time.monotonic()
    kernel.km.interrupt_kernel()
    reply, outputs = kernel.collect(msg_id, timeout=30)
    assert time.monotonic() - started < 5
    assert reply["status"] == "error"
    assert reply["ename"] == "KeyboardInterrupt"
    assert "Run cancelled" in text_of(outputs)
    time.sleep(2.0)  # requests sent right after an interrupt may be aborted (reference notes)
    reply, outputs = kernel.run("%%agent -m m\nsecond")
    assert reply["status"] == "ok", reply
    assert "Second answer." in text_of(outputs)
    _, outputs = kernel.run("print([x.text for x in m.requests[1].messages])")
    assert text_of(outputs).strip() == "['first', 'Thinking about it', 'second']"


def test_the_session_file_sits_beside_the_notebook_and_survives_a_restart(jupyter_env: Path) -> None:
    notebook = jupyter_env / "analysis.ipynb"
    notebook.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(notebook)})
    try:
        kernel.run(SETUP + "m = ScriptedModel(['Noted: your name is Ada.'])")
        reply, _ = kernel.run("%%agent -m m\nMy name is Ada.")
        assert reply["status"] == "ok", reply
        assert (jupyter_env / "analysis.agent.jsonl").exists()
        kernel.restart()
        kernel.run(SETUP + "m = ScriptedModel(['Your name is Ada.'])")
        reply, outputs = kernel.run("%%agent -m m\nWhat is my name?")
        assert reply["status"] == "ok", reply
        _, outputs = kernel.run("print([x.text for x in m.requests[0].messages])")
        assert (
            text_of(outputs).strip() == "['My name is Ada.', 'Noted: your name is Ada.', 'What is my name?']"
        )
    finally:
        kernel.close()


def test_named_sessions_are_separate_files(jupyter_env: Path) -> None:
    notebook = jupyter_env / "analysis.ipynb"
    notebook.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(notebook)})
    try:
        kernel.run(SETUP + "m = ScriptedModel(['one', 'two'])")
        kernel.run("%%agent -m m\nfirst")
        reply, _ = kernel.run("%%agent -m m --session eda\nsecond")
        assert reply["status"] == "ok"
        assert (jupyter_env / "analysis.eda.agent.jsonl").exists()
        _, outputs = kernel.run("print(len(m.requests[1].messages))")
        assert text_of(outputs).strip() == "1"
        _, outputs = kernel.run("%agent session list")
        listing = text_of(outputs)
        assert "(default)" in listing
        assert "eda" in listing
    finally:
        kernel.close()


def test_side_calls_on_the_utility_model_are_shown_apart(kernel: Kernel) -> None:
    kernel.run(
        SETUP
        + "from ipyagent.testing import usage, text\n"
        + "m = ScriptedModel(['hi'])\n"
        + "said = [usage(input_tokens=70, output_tokens=7), text('Summary: said hi.')]\n"
        + "small = ScriptedModel([said], model_id='scripted/small')\n"
        + "get_ipython().magics_manager.registry['AgentMagics'].utility_model = 'small'"
    )
    reply, _ = kernel.run("%%agent -m m --plugins summaries\nhello")
    assert reply["status"] == "ok", reply
    _, outputs = kernel.run("print(len(m.requests), len(small.requests))")
    assert text_of(outputs).strip() == "1 1"  # the run's summary went to the utility model
    _, outputs = kernel.run("%agent usage")
    shown = text_of(outputs)
    assert "over 2 request(s)" in shown
    assert "of which side calls (summaries, on scripted/small): 70 in / 7 out over 1 request(s)" in shown


def test_line_commands(kernel: Kernel) -> None:
    kernel.run(SETUP + "m = ScriptedModel(['hi'])")
    kernel.run("%%agent -m m\nhello")
    _, outputs = kernel.run("%agent usage")
    assert "over 1 request(s)" in text_of(outputs)
    _, outputs = kernel.run("%agent history")
    assert "user: hello" in text_of(outputs)
    _, outputs = kernel.run("%agent models")
    assert "OPENAI_API_KEY not set" in text_of(outputs)
    reply, outputs = kernel.run("%agent model nowhere/x")
    assert reply["status"] == "error"
    assert "Unknown endpoint" in text_of(outputs)
    _, outputs = kernel.run("%agent reset\n%agent history")
    assert "hello" not in text_of(outputs)
    _, outputs = kernel.run("%agent help")
    assert "%%agent [options]" in text_of(outputs)


def test_usage_shows_the_prompt_cache(kernel: Kernel) -> None:
    kernel.run(
        SETUP
        + "from ipyagent.testing import usage\n"
        + "report = usage(input_tokens=1_000, cache_read_tokens=9_000, output_tokens=10)\n"
        + "m = ScriptedModel([[report, text('hi')]], model_id='anthropic/claude-sonnet-4-5')"
    )
    kernel.run("%%agent -m m\nhello")
    _, outputs = kernel.run("%agent usage")
    shown = text_of(outputs)
    assert "(9,000 cached)" in shown
    # 9,000 tokens read at $0.30 instead of $3.00 a million.
    assert "prompt cache: 9,000 of 10,000 prompt tokens read from it (90%), 0 written" in shown
    assert "caching saved $0.0243" in shown


OWN_TOOLS = '''
from ipyagent import tool, BlockToolCall
from ipyagent.kernel import hooks

@tool(read_only=True)
def lookup_price(product: str) -> float:
    """The unit price of a product."""
    return 2.5

orders = []

def place_order(product: str, quantity: int) -> str:
    """Order some units of a product."""
    orders.append((product, quantity))
    return f"ordered {quantity} {product}"

@hooks.before_tool_call
def no_big_orders(call):
    if call.name == "place_order" and call.arguments["quantity"] > 10:
        raise BlockToolCall("Orders above 10 need a manager's approval.")
'''


def test_the_users_own_tools_and_the_kernels_hooks(kernel: Kernel) -> None:
    kernel.run(SETUP + OWN_TOOLS)
    kernel.run(
        "m = ScriptedModel([[tool_call('lookup_price', {'product': 'widget'})], 'It costs 2.5.',"
        " [tool_call('place_order', {'product': 'widget', 'quantity': 3})], 'Ordered.',"
        " [tool_call('place_order', {'product': 'widget', 'quantity': 50})], 'Blocked.'])"
    )
    # A read-only tool of the user's runs without asking; the groups not named are not offered.
    reply, outputs = kernel.run("%%agent -m m --tools lookup_price,place_order -o r\nPrice of a widget?")
    assert reply["status"] == "ok", reply
    assert '→ lookup_price(product="widget") ✓' in text_of(outputs)
    _, outputs = kernel.run("print(sorted(t.name for t in m.requests[0].tools))")
    assert text_of(outputs).strip() == "['lookup_price', 'place_order']"

    reply, outputs = kernel.run("%%agent -y -m m --tools python,place_order\nOrder 3 widgets.")
    assert reply["status"] == "ok", reply
    reply, outputs = kernel.run("%%agent -y -m m --tools python,place_order\nOrder 50 widgets.")
    assert "Orders above 10 need a manager's approval." in text_of(outputs)
    _, outputs = kernel.run("print(orders, [t.name for t in m.requests[2].tools][-1])")
    assert text_of(outputs).strip() == "[('widget', 3)] place_order"

    reply, outputs = kernel.run("%%agent -m m --tools python,nonesuch\nHello")
    assert reply["status"] == "error"
    assert "Unknown tool group or tool: nonesuch" in text_of(outputs)


def test_a_chat_driven_from_code_waits_while_its_tools_use_the_main_thread(kernel: Kernel) -> None:
    kernel.run(
        SETUP + "m = ScriptedModel([[tool_call('run_python', {'code': 'import threading\\n"
        "on_main = threading.current_thread() is threading.main_thread()'})], 'Done.'])"
    )
    reply, outputs = kernel.run("chat = %agent chat -y -m m\nchat.submit('Check the thread.')")
    assert reply["status"] == "ok", text_of(outputs)
    # run_python needs the kernel's main thread, which this cell occupies: wait() serves it.
    reply, outputs = kernel.run("r = chat.wait(timeout=60)\nprint(r.status, repr(r.text), on_main)")
    assert reply["status"] == "ok", text_of(outputs)
    assert text_of(outputs).strip() == "completed 'Done.' True"
    _, outputs = kernel.run("print(chat.wait() is r, len(chat.agent.messages))")
    assert text_of(outputs).strip() == "True 4"


EMPTY_NOTEBOOK = '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'


def test_after_a_restart_history_and_usage_show_the_saved_conversation(jupyter_env: Path) -> None:
    notebook = jupyter_env / "analysis.ipynb"
    notebook.write_text(EMPTY_NOTEBOOK)
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(notebook)})
    try:
        kernel.run(SETUP + "m = ScriptedModel(['Noted: your name is Ada.'])")
        reply, _ = kernel.run("%%agent -m m\nMy name is Ada.")
        assert reply["status"] == "ok", reply
        kernel.restart()
        kernel.run(SETUP)
        _, outputs = kernel.run("%agent history")
        shown = text_of(outputs)
        assert "user: My name is Ada." in shown
        assert "assistant: Noted: your name is Ada." in shown
        _, outputs = kernel.run("%agent usage")
        assert "over 1 request(s)" in text_of(outputs)
        # Reset, too, acts on the saved conversation: the next run starts afresh.
        kernel.run("%agent reset")
        kernel.run("m = ScriptedModel(['Hello.'])")
        reply, _ = kernel.run("%%agent -m m\nWho am I?")
        assert reply["status"] == "ok", reply
        _, outputs = kernel.run("print([x.text for x in m.requests[0].messages])")
        assert text_of(outputs).strip() == "['Who am I?']"
    finally:
        kernel.close()


def test_a_renamed_notebook_says_where_its_conversation_is_and_can_continue_it(jupyter_env: Path) -> None:
    old = jupyter_env / "draft.ipynb"
    old.write_text(EMPTY_NOTEBOOK)
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(old)})
    try:
        kernel.run(SETUP + "m = ScriptedModel(['Noted: your name is Ada.'])")
        reply, _ = kernel.run("%%agent -m m\nMy name is Ada.")
        assert reply["status"] == "ok", reply
    finally:
        kernel.close()
    new = old.rename(jupyter_env / "report.ipynb")
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(new)})
    try:
        kernel.run(SETUP)
        _, outputs = kernel.run("%agent history")
        shown = text_of(outputs)
        assert "draft.agent.jsonl holds a conversation of draft.ipynb, which no longer exists" in shown
        assert "%agent session draft.agent.jsonl" in shown
        reply, _ = kernel.run("%agent session draft.agent.jsonl")
        assert reply["status"] == "ok", reply
        kernel.run("m = ScriptedModel(['Your name is Ada.'])")
        reply, _ = kernel.run("%%agent -m m\nWhat is my name?")
        assert reply["status"] == "ok", reply
        _, outputs = kernel.run("print([x.text for x in m.requests[0].messages])")
        assert (
            text_of(outputs).strip() == "['My name is Ada.', 'Noted: your name is Ada.', 'What is my name?']"
        )
        assert not (jupyter_env / "report.agent.jsonl").exists()
    finally:
        kernel.close()


def test_a_budget_stops_a_run_and_usage_lists_each_runs_cost(kernel: Kernel) -> None:
    kernel.run(
        SETUP
        + "from ipyagent.testing import usage\n"
        + "spent = usage(input_tokens=100_000, output_tokens=10_000)\n"
        + "turn = [tool_call('describe_variable', {'name': 'x'}), spent]\n"
        + "x = 3\n"
        + "m = ScriptedModel([turn] * 5 + ['Done.'], model_id='openai/gpt-4.1')"
    )
    reply, outputs = kernel.run("%%agent -m m -o res --budget cost=0.50\nLook at x again and again.")
    assert reply["status"] == "ok", reply
    assert "reaching its budget of $0.50" in text_of(outputs)  # the cell says why it stopped
    _, outputs = kernel.run("print(res.status, len(m.requests), round(res.usage.cost, 2))")
    assert text_of(outputs).strip() == "exhausted 2 0.56"  # $0.28 a turn at gpt-4.1's price
    _, outputs = kernel.run("%agent usage")
    shown = text_of(outputs)
    assert "budget: run $0.50" in shown
    assert "1. exhausted openai/gpt-4.1: 200,000 in / 20,000 out · $0.5600" in shown
    reply, outputs = kernel.run("%%agent -m m --budget tokens=lots\nAgain.")
    assert reply["status"] == "error"
    assert "Cannot read the budget 'tokens=lots'" in text_of(outputs)


def test_the_model_may_ask_the_user_where_a_view_could_show_the_question(kernel: Kernel) -> None:
    ask = "tool_call('ask_user', {'question': 'Which column?', 'choices': ['price', 'amount']})"
    kernel.run(SETUP + f"m = ScriptedModel([{ask}, 'I will guess.'])")
    # A request like a page's may come from a front end: the tool is offered. Nobody shows the
    # view here, so after the grace the question is declined and the model told no one answers.
    reply, outputs = kernel.run("%%agent -m m\nTotal the sales.", as_page=True)
    assert reply["status"] == "ok", reply
    _, outputs = kernel.run(
        "print('ask_user' in [t.name for t in m.requests[0].tools])\n"
        "print(m.requests[1].messages[-1].tool_results[0].content[:31])"
    )
    assert text_of(outputs).split("\n")[:2] == ["True", "No one is here to answer (the r"]
    # A request as nbclient sends it (nbval, `python -m ipyagent run`): headless, not offered.
    kernel.run("m2 = ScriptedModel(['Fine.'])")
    kernel.run("%%agent -m m2\nTotal the sales.")
    _, outputs = kernel.run("print('ask_user' in [t.name for t in m2.requests[0].tools])")
    assert text_of(outputs).strip() == "False"


def test_output_type_gives_the_typed_answer(kernel: Kernel) -> None:
    kernel.run(
        SETUP
        + "from typing import Literal\n"
        + "from pydantic import BaseModel\n"
        + "class Ticket(BaseModel):\n    category: Literal['bug', 'billing']\n    urgency: int\n"
        + 'invalid = \'{"category": "feature", "urgency": 2}\'\n'
        + 'm = ScriptedModel([invalid, \'{"category": "bug", "urgency": 4}\'])'
    )
    reply, outputs = kernel.run("%%agent -m m -o res --output-type Ticket\nThe app crashes on start.")
    assert reply["status"] == "ok", reply
    reply, outputs = kernel.run(
        "print(repr(res.output)); print('not a valid Ticket' in m.requests[1].messages[-1].text)"
    )
    assert text_of(outputs).split() == ["Ticket(category='bug',", "urgency=4)", "True"]
    # An expression of the namespace, and a name that is not there.
    kernel.run("m2 = ScriptedModel(['{\"result\": [1, 2]}'])")
    kernel.run("%%agent -m m2 -o res2 --new --output-type list[int]\nTwo numbers.")
    _, outputs = kernel.run("print(res2.output)")
    assert text_of(outputs).strip() == "[1, 2]"
    reply, outputs = kernel.run("%%agent -m m2 --output-type Tikcet\nx")
    assert reply["status"] == "error"
    assert "--output-type Tikcet: NameError" in text_of(outputs) + str(reply)
