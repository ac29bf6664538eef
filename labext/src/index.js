// ipyagent's JupyterLab 4 / Notebook 7 extension: the live-notebook channel.
//
// For every open notebook, the page keeps one comm to the notebook's kernel (target
// "ipyagent.notebook", registered by `%load_ext ipyagent`) and answers the kernel's requests from
// the open document model — unsaved edits, active and selected cells included. The page opens
// the comm when it finds the kernel's announce comm (a kernel that loaded ipyagent before the
// page connected) or when the kernel opens one (a `%load_ext` run later, a restarted kernel).
// Kernels that never load ipyagent are never sent anything but a comm_info request.
// On the cells it shows the review of the kernel's edits (review.js), each run's bar (runs.js),
// kept across a reload (persist.js), and the Fix button on a failed cell (fix.js).
// The protocol: docs/live-notebook-protocol.md.

import { Notification } from "@jupyterlab/apputils";
import { INotebookTracker, NotebookActions } from "@jupyterlab/notebook";
import pkg from "../package.json";
import { ANNOUNCE_TARGET, PROTOCOL, TARGET, hello, mismatchMessage } from "./protocol.js";
import { applyCellOutputs, findCell } from "./cell_outputs.js";
import { EditLog, applyEdit, inverseFor, outputsBefore, reviewsOf, undoEdit } from "./edits.js";
import { FixOutput, fixRequest, offersFix } from "./fix.js";
import { FIX_CLASS, REVIEW_CLASS, RUN_BAR_CLASS, ensureStyle, fixElement, reviewElement, runBarElement } from "./review.js";
import { restore, snapshotText, storageKey } from "./persist.js";
import { RunLog, runOf, undoRunMessage } from "./runs.js";
import { documentSnapshot } from "./snapshot.js";

/** How long the page waits for the kernel's answer to its own request (`undo_variables`). */
const ASK_TIMEOUT_MS = 10000;
/** How long to wait for the comm's subshell (the way past a busy main shell) before opening anyway. */
const SUBSHELL_WAIT_MS = 2000;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The adapter edits.js changes a document through, over a notebook's shared model. It reads the
 * cells from the Yjs array, not from `sharedModel.cells`, which is updated only when a transaction
 * ends: an edit's ops run in one transaction and each must see what the previous one did. Outputs
 * an undo puts back are set on the cells' models after it (`later`), as a run's outputs are.
 */
function sharedDocument(sharedModel, later) {
  const ycells = sharedModel.ydoc.getArray("cells");
  const ymeta = (i) => ycells.get(i).get("metadata");
  return {
    ids: () => ycells.toArray().map((cell) => cell.get("id")),
    source: (i) => String(ycells.get(i).get("source")),
    setSource: (i, value) => {
      const text = ycells.get(i).get("source");
      text.delete(0, text.length);
      text.insert(0, value);
    },
    cellJSON: (i) => ycells.get(i).toJSON(),
    setOutputs: (i, outputs, count) => later.push({ id: ycells.get(i).get("id"), outputs, count }),
    insert: (i, cell) => sharedModel.insertCell(i, cell).id,
    remove: (i) => sharedModel.deleteCell(i),
    move: (from, to) => {
      const cell = ycells.get(from).toJSON();
      sharedModel.deleteCell(from);
      sharedModel.insertCell(to, cell);
    },
    getMeta: (i) => {
      const meta = ymeta(i);
      const value = meta && typeof meta.get === "function" ? meta.get("ipyagent") : meta && meta.ipyagent;
      return value === undefined ? undefined : JSON.parse(JSON.stringify(value));
    },
    setMeta: (i, value) => {
      const meta = ymeta(i);
      if (meta && typeof meta.set === "function") {
        if (value === undefined) meta.delete("ipyagent");
        else meta.set("ipyagent", value);
      } else {
        const plain = { ...(meta || {}) };
        if (value === undefined) delete plain.ipyagent;
        else plain.ipyagent = value;
        ycells.get(i).set("metadata", plain);
      }
    },
  };
}

/**
 * Change the document in one transaction that is one undo step: the undo manager stops capturing
 * before and after, so Ctrl-Z undoes the agent's change whole and never merges it with the user's
 * typing.
 */
function inOneStep(sharedModel, change, cells) {
  const undo = sharedModel.undoManager;
  if (undo) undo.stopCapturing();
  let result;
  const later = [];
  sharedModel.transact(() => {
    result = change(sharedDocument(sharedModel, later));
  });
  if (undo) undo.stopCapturing();
  for (const { id, outputs, count } of later) {
    try {
      applyCellOutputs(findCell(cells, id), { cell_id: id, reset: true, outputs, running: false, execution_count: count });
    } catch (err) {
      console.warn("ipyagent: could not put a cell's outputs back:", (err && err.message) || err);
    }
  }
  return result;
}

/** A cell's outputs as `{output_type}` only: read at every render, so no output is serialized. */
function outputTypes(outputs) {
  const types = [];
  for (let i = 0; i < outputs.length; i++) types.push({ output_type: outputs.get(i).type });
  return types;
}

/** The channel of one document (all its views share a session) to its kernel. */
class Link {
  constructor(sessionContext, client) {
    this.session = sessionContext;
    this.client = client;
    this.views = new Set();
    this.current = null;
    this.kernel = null;
    this.comm = null;
    /** The page's requests to the kernel awaiting its response: id -> {resolve, reject, timer}. */
    this.asking = new Map();
    this.asked = 0;
    this._state = "idle";
    this.warned = false;
    this.probeWhenIdle = false;
    this.edits = new EditLog();
    /** The edits grouped by the run that made them: "Undo run" and "Keep all". */
    this.runs = new RunLog();
    this.lookup = (editId) => this.edits.get(editId);
    /** Cells awaiting the user's review: cell id -> {editId, run, before, after, note, fix, explanation}. */
    this.reviews = new Map();
    /** Cells whose Fix is running (`%agent fix` in the kernel). */
    this.fixing = new Set();
    this.renderScheduled = false;
    this.saveScheduled = false;
    this.loaded = false;
    this.onAnnounce = () => void this.connect();
    sessionContext.kernelChanged.connect(this.onKernelChanged, this);
    sessionContext.statusChanged.connect(this.onStatus, this);
    this.attach(sessionContext.session ? sessionContext.session.kernel : null);
  }

  /** idle | connecting | connected | mismatch; shown on each view's node as data-ipyagent-live. */
  get state() {
    return this._state;
  }

  set state(value) {
    const changed = value !== this._state;
    this._state = value;
    for (const view of this.views) view.node.dataset.ipyagentLive = value;
    // The Fix buttons are offered only while the kernel's ipyagent is connected.
    if (changed) this.scheduleReviews();
  }

  addView(view) {
    this.views.add(view);
    this.current = this.current || view;
    this.load();
    view.node.dataset.ipyagentLive = this._state;
    // Cells are re-created when moved, and shown again when scrolled to: the review follows.
    view.content.modelContentChanged.connect(this.scheduleReviews, this);
  }

  removeView(view) {
    if (!view.content.isDisposed) view.content.modelContentChanged.disconnect(this.scheduleReviews, this);
    this.views.delete(view);
    if (this.current === view) this.current = this.views.values().next().value || null;
    return this.views.size === 0;
  }

  dispose() {
    this.session.kernelChanged.disconnect(this.onKernelChanged, this);
    this.session.statusChanged.disconnect(this.onStatus, this);
    if (this.kernel && !this.kernel.isDisposed) this.kernel.removeCommTarget(ANNOUNCE_TARGET, this.onAnnounce);
    this.drop(true);
  }

  onKernelChanged(_, change) {
    if (this.kernel && !this.kernel.isDisposed) this.kernel.removeCommTarget(ANNOUNCE_TARGET, this.onAnnounce);
    this.drop(true);
    this.attach(change.newValue);
  }

  attach(kernel) {
    this.kernel = kernel || null;
    if (!this.kernel) return;
    this.kernel.registerCommTarget(ANNOUNCE_TARGET, this.onAnnounce);
    void this.probe();
  }

  onStatus(_, status) {
    if (status === "restarting" || status === "autorestarting" || status === "dead") {
      // The kernel's comms die with it; the restarted kernel announces itself if it loads ipyagent.
      this.drop(false);
      this.probeWhenIdle = true;
    } else if (status === "idle" && this.probeWhenIdle) {
      this.probeWhenIdle = false;
      void this.probe();
    }
  }

  /** Whether the kernel has loaded ipyagent: its announce comm is open. */
  async probe() {
    const kernel = this.kernel;
    if (!kernel || kernel.isDisposed) return;
    try {
      const reply = await kernel.requestCommInfo({ target_name: ANNOUNCE_TARGET });
      const comms = reply.content.status === "ok" ? reply.content.comms : {};
      if (kernel === this.kernel && Object.keys(comms).length > 0) await this.connect();
    } catch (err) {
      // The kernel went away or restarted meanwhile: its successor is probed when idle.
    }
  }

  async connect() {
    const kernel = this.kernel;
    if (!kernel || kernel.isDisposed || this.state === "connecting" || this.state === "connected") return;
    this.state = "connecting";
    const comm = kernel.createComm(TARGET);
    this.comm = comm;
    comm.onMsg = (msg) => this.onMessage(comm, msg);
    comm.onClose = () => {
      if (this.comm === comm) this.reset();
    };
    try {
      await kernel.info;
      // JupyterLab >= 4.4 sends a comm's messages over a subshell of the kernel when it can, so
      // that they are handled while a cell blocks the main shell. Open on it once it exists.
      if (kernel.supportsSubshells && comm.subshellStarted) {
        await Promise.race([comm.subshellStarted.catch(() => undefined), sleep(SUBSHELL_WAIT_MS)]);
      }
      if (this.comm !== comm || comm.isDisposed) return;
      // Not awaited: the kernel answers with a welcome (or closes the comm), not a reply.
      comm.open(hello({ version: pkg.version, client: this.client, path: this.session.path }));
    } catch (err) {
      console.warn("ipyagent: could not open the live-notebook channel", err);
      if (this.comm === comm) this.reset();
    }
  }

  reset() {
    this.comm = null;
    if (this.state !== "mismatch") this.state = "idle";
  }

  drop(close) {
    const comm = this.comm;
    this.comm = null;
    this.state = "idle";
    for (const id of [...this.asking.keys()]) this.answered({ id, ok: false, error: "the kernel went away" });
    if (close && comm && !comm.isDisposed) {
      try {
        comm.close();
      } catch (err) {
        // The kernel is already gone.
      }
    }
  }

  focus(view) {
    this.current = view;
    this.send({ kind: "focus" });
  }

  send(data) {
    const comm = this.comm;
    if (this.state === "connected" && comm && !comm.isDisposed) comm.send(data);
  }

  /** Ask the kernel (protocol 7): a request it answers with a response of the same id. */
  ask(method, params) {
    const comm = this.comm;
    if (this.state !== "connected" || !comm || comm.isDisposed) {
      return Promise.reject(new Error("the kernel's ipyagent is not connected to this page"));
    }
    this.asked += 1;
    const id = `page-${this.asked}-${Date.now()}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.asking.delete(id);
        // The request stays queued in a busy kernel (ipykernel 6 has no subshell): it is done later.
        reject(new Error(`the kernel did not answer within ${ASK_TIMEOUT_MS / 1000} s (busy?); it does it when it gets to it`));
      }, ASK_TIMEOUT_MS);
      this.asking.set(id, { resolve, reject, timer });
      comm.send({ kind: "request", id, method, params });
    });
  }

  /** The kernel's response to one of the page's requests. */
  answered({ id, ok, result, error }) {
    const waiting = this.asking.get(id);
    if (!waiting) return;
    this.asking.delete(id);
    clearTimeout(waiting.timer);
    if (ok) waiting.resolve(result || {});
    else waiting.reject(new Error(error || "the kernel gave no reason"));
  }

  onMessage(comm, msg) {
    if (comm !== this.comm) return;
    const data = msg.content.data || {};
    switch (data.kind) {
      case "welcome":
        if (data.protocol === PROTOCOL) {
          this.state = "connected";
        } else {
          this.mismatch(data);
        }
        break;
      case "mismatch":
        this.mismatch(data);
        break;
      case "request":
        this.answer(comm, data);
        break;
      case "notice":
        this.notice(data);
        break;
      case "response":
        this.answered(data);
        break;
      default:
        console.warn(`ipyagent: unknown message from the kernel: ${JSON.stringify(data.kind)}`);
    }
  }

  mismatch(data) {
    this.state = "mismatch";
    if (this.warned) return;
    this.warned = true;
    const { action, text } = mismatchMessage({
      pageProtocol: PROTOCOL,
      pageVersion: pkg.version,
      kernelProtocol: Number(data.protocol),
      kernelVersion: String(data.version),
    });
    console.warn(text);
    const button =
      action === "reload"
        ? { label: "Reload page", callback: () => window.location.reload() }
        : { label: "Restart kernel", callback: () => void this.session.restartKernel() };
    Notification.warning(text, { autoClose: false, actions: [button] });
  }

  answer(comm, request) {
    let reply;
    try {
      reply = { kind: "response", id: request.id, ok: true, result: this.handle(request) };
    } catch (err) {
      reply = { kind: "response", id: request.id, ok: false, error: String((err && err.message) || err) };
    }
    if (!comm.isDisposed) comm.send(reply);
  }

  /** A notice is acted on and not answered: the kernel sends it from a cell it is running. */
  notice({ method, params }) {
    try {
      if (method !== "cell_outputs") throw new Error(`unknown notice ${JSON.stringify(method)}`);
      const view = this.current;
      if (!view || !view.content.model) throw new Error("the notebook is no longer open in this page");
      const p = params || {};
      const cell = findCell(view.content.model.cells, p.cell_id);
      if (p.reset && typeof p.run === "string" && p.run && cell) this.ranInRun(p.run, cell);
      applyCellOutputs(cell, p);
    } catch (err) {
      console.warn("ipyagent: could not show a cell's outputs:", (err && err.message) || err);
    }
  }

  handle({ method, params }) {
    switch (method) {
      case "ping":
        return {};
      case "read_notebook": {
        const view = this.current;
        if (!view) throw new Error("the notebook is no longer open in this page");
        const p = params || {};
        return documentSnapshot(view, {
          maxChars: Number.isInteger(p.max_output_chars) ? p.max_output_chars : undefined,
          start: p.start,
          limit: p.limit,
          pageChars: p.page_chars,
        });
      }
      case "edit":
        return this.edit(params || {});
      case "undo_edit":
        return this.undo(params || {});
      case "undo_run":
        return this.undoRun((params || {}).run || null);
      default:
        throw new Error(
          `this page's ipyagent extension (${pkg.version}) does not know the request ${JSON.stringify(method)}`,
        );
    }
  }

  /** A run starts running `cell`: what the cell shows now is part of the run's checkpoint (once
   * per run and cell: the first run of it is what an undo goes back to). */
  ranInRun(run, cell) {
    const key = `outputs:${run}:${cell.id}`;
    if (this.edits.get(key)) return;
    const before = { id: cell.id, source: cell.sharedModel.getSource(), outputs: cell.outputs.toJSON(), execution_count: cell.executionCount };
    this.edits.remember(key, { answer: null, undo: [outputsBefore(before)] });
    this.runs.add(run, key);
    this.scheduleReviews();
    this.scheduleSave();
  }

  /** The document's shared model, for the kernel's edits. */
  sharedModel() {
    const view = this.current;
    if (!view || !view.context.model) throw new Error("the notebook is no longer open in this page");
    return view.context.model.sharedModel;
  }

  /** The open document's cell models (outputs and execution counts are set on them). */
  cellModels() {
    const view = this.current;
    return view && view.content.model ? view.content.model.cells : [];
  }

  /** Apply an edit once per edit_id: a repeat (the kernel timed out waiting) gets the first answer. */
  edit({ edit_id: editId, ops, provenance }) {
    if (typeof editId !== "string" || !editId) throw new Error("an edit needs an edit_id");
    const known = this.edits.get(editId);
    if (known) return known.answer;
    const sharedModel = this.sharedModel();
    const newId = () => globalThis.crypto.randomUUID();
    const entry = inOneStep(sharedModel, (doc) => applyEdit(doc, { ops, provenance }, newId), this.cellModels());
    // A refused edit is not remembered: the agent re-reads and sends a new one.
    if (entry.answer.applied) {
      const run = runOf(provenance);
      this.edits.remember(editId, entry);
      this.runs.add(run, editId);
      const fix = Boolean(provenance && provenance.fix);
      for (const { cellId, before, after } of reviewsOf(ops, entry.answer)) {
        this.reviews.set(cellId, { editId, run, before, after, note: "", fix, explanation: "" });
      }
      this.scheduleReviews();
      this.scheduleSave();
    }
    return entry.answer;
  }

  /** Undo an edit by its inverse ops, leaving alone what the user changed since. */
  undo({ edit_id: editId }) {
    const key = `undo:${editId}`;
    const repeated = this.edits.get(key);
    if (repeated) return repeated.answer;
    const entry = this.edits.get(editId);
    if (!entry) {
      throw new Error(
        `this page knows no edit ${JSON.stringify(editId)} (it was made before the page was reloaded, ` +
          "or in another page)",
      );
    }
    const answer = inOneStep(this.sharedModel(), (doc) => undoEdit(doc, entry.undo), this.cellModels());
    this.edits.remember(key, { answer });
    for (const cell of answer.undone) this.reviews.delete(cell.cell_id);
    this.scheduleReviews();
    this.scheduleSave();
    return answer;
  }

  /** Keep: the review goes and the cell stays as the edit left it; a fix's cell runs. */
  keep(cellId) {
    const review = this.reviews.get(cellId);
    if (review) this.runs.keep(review.run, [cellId]);
    this.reviews.delete(cellId);
    this.scheduleReviews();
    this.scheduleSave();
    if (review && review.fix && !review.note) this.runCell(cellId);
  }

  /** Keep all: the run's reviews go and its cells stay as they are; its fixes' cells run. */
  keepRun(run) {
    this.runs.keep(run, this.runs.pendingCells(run, this.lookup));
    const fixed = [];
    for (const [cellId, review] of this.reviews) {
      if (review.run !== run) continue;
      this.reviews.delete(cellId);
      if (review.fix && !review.note) fixed.push(cellId);
    }
    this.scheduleReviews();
    this.scheduleSave();
    for (const cellId of fixed) this.runCell(cellId);
  }

  /** Run a cell as the user would (queued behind whatever the kernel is running). */
  runCell(cellId) {
    const view = this.current;
    const notebook = view && view.content;
    const widget = notebook && notebook.widgets.find((w) => w.model.id === cellId);
    if (!widget) return;
    if (typeof NotebookActions.runCells === "function") {
      void NotebookActions.runCells(notebook, [widget], view.sessionContext);
    } else {
      // JupyterLab before 4.2: run the active cell.
      notebook.activeCellIndex = notebook.widgets.indexOf(widget);
      void NotebookActions.run(notebook, view.sessionContext);
    }
  }

  /**
   * The Fix button: `%agent fix` for that cell, as an execute request of its own (nothing is added
   * to the notebook, no execution count taken). Its edit comes back as a reviewed fix; what the
   * run said is shown on that review, or in a notification when it proposed none.
   */
  async fix(cellId) {
    const kernel = this.kernel;
    if (!kernel || kernel.isDisposed || this.fixing.has(cellId)) return;
    this.fixing.add(cellId);
    this.scheduleReviews();
    const output = new FixOutput();
    let outcome;
    try {
      const future = kernel.requestExecute(fixRequest(cellId));
      future.onIOPub = (msg) => output.onMessage(msg);
      outcome = output.outcome(await future.done);
    } catch (err) {
      outcome = { ok: false, text: String((err && err.message) || err) };
    } finally {
      this.fixing.delete(cellId);
    }
    const review = this.reviews.get(cellId);
    if (outcome.ok && review && review.fix) {
      this.reviews.set(cellId, { ...review, explanation: outcome.text });
    } else if (outcome.ok) {
      Notification.info(`ipyagent: ${outcome.text}`, { autoClose: false });
    } else {
      Notification.error(`ipyagent could not fix the cell: ${outcome.text}`, { autoClose: false });
    }
    this.scheduleReviews();
  }

  /**
   * Undo a run (null: the latest with changes left): its edits' inverse ops, newest first, guarded
   * cell by cell. The cells put back lose their review; a cell the user changed since keeps it,
   * saying why it was left alone.
   */
  undoRun(requested) {
    const run = requested || this.runs.latest(this.lookup);
    if (!run) throw new Error("no run's changes are left to undo in this page (none made since it was loaded, or all kept or undone)");
    const answer = inOneStep(this.sharedModel(), (doc) => this.runs.undo(doc, run, this.lookup), this.cellModels());
    for (const cell of answer.undone) this.reviews.delete(cell.cell_id);
    for (const cell of answer.kept) {
      const review = this.reviews.get(cell.cell_id);
      if (review && cell.source !== undefined) {
        this.reviews.set(cell.cell_id, { ...review, note: `Not undone: ${cell.why}, so your work there is kept.` });
      } else {
        this.reviews.delete(cell.cell_id);
      }
    }
    this.scheduleReviews();
    this.scheduleSave();
    return { run, ...answer };
  }

  /** The run bar's Undo run: undo the cells, ask the kernel to put back the run's variables, then
   * tell the user what was put back and what was not. */
  async undoRunClicked(run) {
    let answer;
    try {
      answer = this.undoRun(run);
    } catch (err) {
      Notification.error(`ipyagent: could not undo run ${run}: ${(err && err.message) || err}`, { autoClose: false });
      return;
    }
    let variables;
    try {
      variables = await this.ask("undo_variables", { run: answer.run });
    } catch (err) {
      variables = { error: String((err && err.message) || err) };
    }
    Notification.info(undoRunMessage(run, answer, variables), { autoClose: false });
  }

  /** Undo one reviewed cell: the inverse ops of its edit for that cell only (the user may have
   * kept the edit's other cells), guarded like any undo. */
  undoCell(cellId) {
    const review = this.reviews.get(cellId);
    const entry = review && this.edits.get(review.editId);
    if (!entry) {
      this.reviews.delete(cellId);
      this.scheduleReviews();
      return;
    }
    const ops = inverseFor(entry.undo, cellId);
    const { kept } = inOneStep(this.sharedModel(), (doc) => undoEdit(doc, ops), this.cellModels());
    entry.undo = entry.undo.filter((op) => !ops.includes(op));
    if (kept.length > 0) {
      this.reviews.set(cellId, { ...review, note: `Not undone: ${kept[0].why}, so your work there is kept.` });
    } else {
      this.reviews.delete(cellId);
    }
    this.scheduleReviews();
    this.scheduleSave();
  }

  /** The browser's storage of this document's checkpoints (see persist.js), or null. */
  storage() {
    try {
      return this.session.path ? globalThis.localStorage || null : null;
    } catch (err) {
      return null; // storage switched off for this site
    }
  }

  /** Once, when the first view opens: the runs this browser remembers of the document. */
  load() {
    if (this.loaded) return;
    this.loaded = true;
    const storage = this.storage();
    const text = storage && storage.getItem(storageKey(this.session.path));
    if (text && restore(text, { edits: this.edits, runs: this.runs, reviews: this.reviews })) this.scheduleReviews();
  }

  scheduleSave() {
    if (this.saveScheduled) return;
    this.saveScheduled = true;
    setTimeout(() => {
      this.saveScheduled = false;
      const storage = this.storage();
      if (!storage) return;
      const key = storageKey(this.session.path);
      try {
        const text = snapshotText({ edits: this.edits, runs: this.runs, reviews: this.reviews });
        if (text === null) storage.removeItem(key);
        else storage.setItem(key, text);
      } catch (err) {
        // Full: the page still remembers them until it is reloaded.
        console.warn("ipyagent: could not keep this notebook's checkpoints for a reload:", (err && err.message) || err);
      }
    }, 0);
  }

  scheduleReviews() {
    if (this.renderScheduled) return;
    this.renderScheduled = true;
    setTimeout(() => {
      this.renderScheduled = false;
      this.renderReviews();
    }, 0);
  }

  /** Show each review on its cell, and take away those kept or undone; each run still to review
   * shows its bar (see barPlaces). */
  renderReviews() {
    for (const view of this.views) {
      if (view.isDisposed) continue;
      const widgets = view.content.widgets;
      for (const widget of widgets) {
        const review = this.reviews.get(widget.model.id);
        if (review && review.before !== null && widget.model.sharedModel.getSource() === review.before) {
          // Taken back (JupyterLab's Undo, or by hand): nothing left to review.
          this.reviews.delete(widget.model.id);
        }
      }
      const bars = this.barPlaces(widgets.map((w) => w.model.id));
      for (const widget of widgets) {
        const review = this.reviews.get(widget.model.id);
        this.renderRunBars(widget, bars.get(widget.model.id) || []);
        this.renderFixButton(widget, review);
        const shown = widget.node.querySelector(`:scope > .${REVIEW_CLASS}`);
        const key = review ? `${review.note}\u0000${review.explanation || ""}` : "";
        if (shown && (!review || shown.dataset.key !== key)) shown.remove();
        if (!review || (shown && shown.isConnected)) continue;
        ensureStyle();
        const id = widget.model.id;
        const el = reviewElement({
          before: review.before,
          after: review.after,
          note: review.note,
          fix: review.fix,
          explanation: review.explanation,
          onKeep: () => this.keep(id),
          onUndo: () => this.undoCell(id),
        });
        el.dataset.key = key;
        const barsShown = widget.node.querySelectorAll(`:scope > .${RUN_BAR_CLASS}`);
        const input = widget.node.querySelector(":scope > .jp-Cell-inputWrapper");
        if (barsShown.length > 0) barsShown[barsShown.length - 1].after(el);
        else if (input) input.after(el);
        else widget.node.prepend(el);
      }
    }
  }

  /**
   * Where each run still to review shows its bar: on the first cell, in the document's order
   * (`ids`), that shows a review of the run; for a run with none (it only moved or deleted cells,
   * or its reviewed cells were kept while others are left), on the first cell it changed or that
   * a cell it deleted came after. Cell id -> the runs whose bar it shows, oldest first.
   */
  barPlaces(ids) {
    const places = new Map();
    for (const run of this.runs.reviewed(this.lookup)) {
      const reviewed = ids.find((id) => {
        const review = this.reviews.get(id);
        return review !== undefined && review.run === run;
      });
      const at = reviewed || this.runs.anchor(run, this.lookup, ids);
      if (at) places.set(at, [...(places.get(at) || []), run]);
    }
    return places;
  }

  /** The bars of `runs` on `widget` (and no other run's), below its input. */
  renderRunBars(widget, runs) {
    const wanted = new Map(runs.map((run) => [`${run}:${this.runs.pendingCells(run, this.lookup).length}`, run]));
    for (const shown of widget.node.querySelectorAll(`:scope > .${RUN_BAR_CLASS}`)) {
      if (wanted.has(shown.dataset.key) && shown.isConnected) wanted.delete(shown.dataset.key);
      else shown.remove();
    }
    if (wanted.size === 0) return;
    ensureStyle();
    const shownBars = widget.node.querySelectorAll(`:scope > .${RUN_BAR_CLASS}`);
    let after = shownBars.length > 0 ? shownBars[shownBars.length - 1] : widget.node.querySelector(":scope > .jp-Cell-inputWrapper");
    for (const [key, run] of wanted) {
      const count = this.runs.pendingCells(run, this.lookup).length;
      const el = runBarElement({ run, count, onKeepAll: () => this.keepRun(run), onUndoRun: () => this.undoRunClicked(run) });
      el.dataset.key = key;
      el.dataset.run = run;
      if (after) after.after(el);
      else widget.node.prepend(el);
      after = el;
    }
  }

  /** The Fix button below a failed code cell's outputs, while the kernel's ipyagent is connected
   * and no fix of the cell is under review. */
  renderFixButton(widget, review) {
    const model = widget.model;
    const busy = this.fixing.has(model.id);
    const wanted =
      this.state === "connected" &&
      model.type === "code" &&
      !(review && review.fix) &&
      (busy || offersFix(model.sharedModel.getSource(), outputTypes(model.outputs)));
    const key = wanted ? (busy ? "busy" : "idle") : "";
    const shown = widget.node.querySelector(`:scope > .${FIX_CLASS}`);
    if (shown && shown.dataset.key !== key) shown.remove();
    if (!wanted || (shown && shown.dataset.key === key && shown.isConnected)) return;
    ensureStyle();
    const id = model.id;
    const el = fixElement({ busy, onFix: () => void this.fix(id) });
    el.dataset.key = key;
    const outputs = widget.node.querySelector(":scope > .jp-Cell-outputWrapper");
    if (outputs) outputs.after(el);
    else widget.node.appendChild(el);
  }
}

const plugin = {
  id: "ipyagent:live-notebook",
  description: "The live-notebook channel between ipyagent in the kernel and the open notebook.",
  autoStart: true,
  requires: [INotebookTracker],
  activate(app, tracker) {
    const client = `${app.name} ${app.version}`;
    const links = new Map();

    function track(view) {
      const session = view.sessionContext;
      let link = links.get(session);
      if (!link) {
        link = new Link(session, client);
        links.set(session, link);
      }
      link.addView(view);
      view.disposed.connect(() => {
        if (link.removeView(view)) {
          link.dispose();
          links.delete(session);
        }
      });
    }

    tracker.forEach(track);
    tracker.widgetAdded.connect((_, view) => track(view));
    tracker.currentChanged.connect((_, view) => {
      const link = view && links.get(view.sessionContext);
      if (link) link.focus(view);
    });
    window.addEventListener("focus", () => {
      const view = tracker.currentWidget;
      const link = view && links.get(view.sessionContext);
      if (link) link.focus(view);
    });
  },
};

export default plugin;
