// Files attached to a chat message: picked with the Attach button, pasted or dropped on the
// composer. They show as chips (name, size, ×) until the message is sent with them; the kernel
// turns each into what the model reads (an image, or a text file's contents).

import { h, setText } from "./dom.js";

// The kernel's own limit for an image; a text file is cut to 100,000 characters there. Bigger
// files are refused here, before their bytes cross the comm.
export const MAX_FILE_BYTES = 5_000_000;

export class AttachmentTray {
  constructor(onChange) {
    this.files = [];
    this.onChange = onChange;
    this.input = h("input", {
      type: "file",
      multiple: true,
      hidden: true,
      "aria-hidden": "true",
      data: { role: "files" },
    });
    this.input.addEventListener("change", () => {
      this.add(this.input.files);
      this.input.value = ""; // the same file can be picked again after removing it
    });
    this.button = h("button", {
      class: "ipyagent-button ipyagent-secondary",
      type: "button",
      title: "Attach files or images to the message",
      data: { action: "attach" },
      text: "Attach",
    });
    this.button.addEventListener("click", () => this.input.click());
    this.chips = h("div", { class: "ipyagent-attachments", data: { role: "attachments" } });
    this.note = h("div", { class: "ipyagent-composer-note", role: "status" });
    this.el = h("div", { class: "ipyagent-attachment-tray" }, this.input, this.chips, this.note);
  }

  /** Add files (a FileList or an array); too-big ones are named in the note instead. */
  add(list) {
    const refused = [];
    for (const file of Array.from(list || [])) {
      if (file.size > MAX_FILE_BYTES) refused.push(file.name);
      else this.files.push(file);
    }
    setText(
      this.note,
      refused.length
        ? `Not attached (over ${MAX_FILE_BYTES / 1_000_000} MB): ${refused.join(", ")}`
        : "",
    );
    this.render();
  }

  /** Take the files for a message: names for the content, bytes for the buffers. */
  async take() {
    const files = this.files;
    const buffers = await Promise.all(files.map((file) => file.arrayBuffer()));
    this.files = [];
    setText(this.note, "");
    this.render();
    return { meta: files.map((file) => ({ name: file.name })), buffers };
  }

  render() {
    this.chips.replaceChildren(
      ...this.files.map((file, index) => {
        const remove = h("button", {
          class: "ipyagent-chip-remove",
          type: "button",
          "aria-label": `Remove ${file.name}`,
          text: "×",
        });
        remove.addEventListener("click", () => {
          this.files.splice(index, 1);
          this.render();
        });
        return h(
          "span",
          { class: "ipyagent-chip", data: { role: "attachment" }, title: file.name },
          h("span", { class: "ipyagent-chip-name", text: file.name }),
          h("span", { class: "ipyagent-chip-size", text: formatSize(file.size) }),
          remove,
        );
      }),
    );
    this.onChange();
  }

  /** Paste and drop on `target` attach the files they carry (text pastes as usual). */
  listen(target) {
    target.addEventListener("paste", (e) => {
      const files = e.clipboardData?.files;
      if (files && files.length) {
        e.preventDefault();
        this.add(files);
      }
    });
    target.addEventListener("dragover", (e) => {
      if (e.dataTransfer?.types?.includes("Files")) e.preventDefault();
    });
    target.addEventListener("drop", (e) => {
      const files = e.dataTransfer?.files;
      if (files && files.length) {
        e.preventDefault();
        this.add(files);
      }
    });
  }
}

function formatSize(bytes) {
  if (bytes < 1_000) return `${bytes} B`;
  if (bytes < 1_000_000) return `${Math.round(bytes / 1_000)} KB`;
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}
