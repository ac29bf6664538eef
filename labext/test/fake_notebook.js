// A fake of the adapter index.js gives over the notebook's shared model: an array of nbformat
// code cells made from [id, source] pairs (each with an output when `outputs` is set).

export function arrayDoc(cells, { outputs = false } = {}) {
  const list = cells.map(([id, source]) => ({
    id,
    cell_type: "code",
    source,
    metadata: {},
    ...(outputs ? { outputs: [{ text: `out ${id}` }] } : {}),
  }));
  return {
    list,
    ids: () => list.map((c) => c.id),
    source: (i) => list[i].source,
    setSource: (i, s) => {
      list[i].source = s;
    },
    cellJSON: (i) => structuredClone(list[i]),
    insert: (i, cell) => {
      list.splice(i, 0, structuredClone(cell));
      return cell.id;
    },
    remove: (i) => void list.splice(i, 1),
    // As YNotebook.moveCell(from, to): the cell ends at index `to`.
    move: (from, to) => {
      const [cell] = list.splice(from, 1);
      list.splice(to, 0, cell);
    },
    setOutputs: (i, value, count) => {
      list[i].outputs = structuredClone(value);
      list[i].execution_count = count;
    },
    getMeta: (i) => list[i].metadata.ipyagent,
    setMeta: (i, value) => {
      if (value === undefined) delete list[i].metadata.ipyagent;
      else list[i].metadata.ipyagent = value;
    },
  };
}


export const state = (doc) => doc.list.map((c) => `${c.id}:${c.source}`);
