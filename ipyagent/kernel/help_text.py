"""The text of ``%agent help``: every option of ``%%agent`` and every line command."""

__all__ = ["HELP"]

HELP = """\
%%agent [options]          the cell body is the prompt; {var} inserts a variable, {{ }} literal braces
  -m/--model ID            model for this run, "<endpoint>/<model>" (or a Provider variable's name)
  -s/--session NAME        use the conversation NAME (analysis.NAME.agent.jsonl beside the notebook,
                           or a file of that folder by its name: -s old.agent.jsonl)
  --new                    start a fresh conversation
  -y/--yes                 run tools that change things without asking
  --read-only              refuse every tool that changes something
  --tools LIST             tool groups python,notebook,files (default: all), shell (commands in
                           the OS sandbox; only when named), delegate (hand tasks to sub-agents
                           with some of these tools; only when named) and your own functions by
                           name, e.g. --tools python,lookup_price
  --cells                  the agent's code runs as new cells of the notebook, not hidden in the run
  --max-turns N            model calls allowed in this run
  --budget CAPS            caps on this run: tokens=50k,cost=0.50,time=5m (any of the three)
  --context PARTS          what the model is told of the notebook unasked: cell,outline,variables,error,
                           all or none (default: all; none for the embedded local model)
  --thinking LEVEL         none | low | medium | high
  -o/--output VAR          store the result object (text, messages, usage, status, output) in VAR
  --output-type TYPE       the answer is validated into TYPE (a name or expression of the namespace:
                           Ticket, list[Ticket], int); VAR.output holds the typed value
  --plugins LIST           memory (notes the agent files and recalls, kept in .ipyagent/memory/)
                           and summaries (earlier conversations' summaries told to new ones), or
                           none (default: c.AgentMagics.plugins; see docs/plugins.md)
  --verify                 before the run ends, ask the model once to compute the numbers of its
                           answer that no tool output shows (or to correct them)
  --quiet                  show nothing while running

%agent chat [options]      a chat widget on the current conversation (options as for %%agent)
%agent model [ID]          show or set the model for this kernel
%agent models              configured endpoints and whether each one's key is set
%agent session [list|new|NAME]
%agent usage               tokens and cost of the current conversation and of each run
%agent history             the conversation so far
%agent compact             summarize older turns to free context
%agent reset               forget the current conversation
%agent fix [CELL_ID]       explain the last error (or CELL_ID's) and propose the fix as an edit of that
                           cell, shown as a diff; in JupyterLab with the extension, Keep runs it
%agent undo [RUN]          undo the latest run's changes (or run RUN's): the cells of the open notebook
                           and the variables its code changed; what you changed since stays
%agent mcp [list]           MCP servers, their state and tools (see docs/mcp.md)
%agent mcp add NAME [--trust] [--env K=V] [--header K=V] COMMAND [ARGS...] | URL
                           add a server for this kernel (enabled once you allow it; --trust: now)
%agent mcp remove NAME     stop a server and leave it out
%agent mcp allow NAME      enable a server you declined, or approve one of the folder's .mcp.json
                           as it is now (remembered outside the folder; -y never approves those)
%agent memory [list]       the notes the memory plugin keeps for this folder (--plugins memory)
%agent memory show TITLE | forget TITLE   read or delete one
%agent summaries [list]    the summaries of this notebook's runs (--plugins summaries)
%agent summaries clear     delete them
%agent cassette [record|replay|off] [PATH]  record model streams to a cassette, or replay them offline
%agent help                this text
"""
