// A cell the agent runs (`run_cell`): the kernel runs its code and sends `cell_outputs` notices;
// the page shows them in that cell as a run of the user's would — its old outputs cleared, `[*]`
// while it runs, the outputs as they come (consecutive streams merge in the output model), then
// its execution count. Pure over the cell's model, so node tests it.

const OUTPUT_TYPES = new Set(["stream", "display_data", "execute_result", "error"]);

/** The code cell `id` among `cells` (a notebook model's cell list), or null. */
export function findCell(cells, id) {
  for (const cell of cells) if (cell.id === id) return cell;
  return null;
}

/** Apply one `cell_outputs` notice to a code cell's model. */
export function applyCellOutputs(cell, params) {
  if (!cell || cell.type !== "code") throw new Error(`no code cell ${JSON.stringify(params.cell_id)}`);
  const outputs = Array.isArray(params.outputs) ? params.outputs : [];
  const bad = outputs.find((o) => !o || !OUTPUT_TYPES.has(o.output_type));
  if (bad) throw new Error(`an output of unknown type ${JSON.stringify(bad && bad.output_type)}`);
  if (params.reset) {
    cell.outputs.clear();
    cell.executionCount = null;
  }
  for (const output of outputs) cell.outputs.add(output);
  // JupyterLab >= 4.1 shows `[*]` from the model's execution state; older releases have none.
  if ("executionState" in cell) cell.executionState = params.running ? "running" : "idle";
  if (!params.running && Number.isInteger(params.execution_count)) {
    cell.executionCount = params.execution_count;
  }
}
