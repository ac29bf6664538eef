// Marks on the claims of a run's answer: each number or named value the kernel traced to a tool
// output (or found in none) is wrapped in a span whose title says where it came from. The kernel
// decides what is traced (ipyagent/agentlib/claims.py) and where each claim is: its text and which
// occurrence of that text in the block it is (`nth`, counted outside code blocks, overlapping
// occurrences included); the view only finds that occurrence in the rendered text and marks it.

const CLAIM_CLASS = "ipyagent-claim";

/** The title of a claim's mark: where it was found, or that it was found nowhere. */
export function claimTitle(claim) {
  const source = claim?.source;
  if (!source) return "Not found in any tool output";
  const line = String(source.line ?? "");
  return `✓ From ${source.tool ?? "a tool"} (${source.call ?? "?"}): ${line}`;
}

/**
 * Where the claims are in `texts` (the text nodes' contents, in order): `{claim, node, start, end}`
 * for each claim whose occurrence lies within one node, in order of position. A claim that is not
 * there (the text was rendered differently) or that overlaps one placed before it is left out.
 */
export function locateClaims(texts, claims) {
  const whole = texts.join("");
  const starts = [];
  let offset = 0;
  for (const text of texts) {
    starts.push(offset);
    offset += text.length;
  }
  const placed = [];
  for (const claim of claims ?? []) {
    const wanted = String(claim?.text ?? "");
    const at = nthIndex(whole, wanted, Number(claim?.nth) || 0);
    if (!wanted || at < 0) continue;
    const end = at + wanted.length;
    if (placed.some((p) => p.at < end && at < p.at + p.claim.text.length)) continue;
    const node = lastAtOrBefore(starts, at);
    if (end > starts[node] + texts[node].length) continue; // across elements: not marked
    placed.push({ claim: { ...claim, text: wanted }, at, node, start: at - starts[node], end: end - starts[node] });
  }
  return placed
    .sort((a, b) => a.at - b.at)
    .map(({ claim, node, start, end }) => ({ claim, node, start, end }));
}

function nthIndex(text, wanted, nth) {
  let at = text.indexOf(wanted);
  for (let i = 0; i < nth && at >= 0; i++) at = text.indexOf(wanted, at + 1);
  return at;
}

function lastAtOrBefore(starts, at) {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (starts[mid] <= at) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** Mark `claims` in the rendered Markdown under `root` (code blocks are not searched). */
export function markClaims(root, claims) {
  const nodes = textNodes(root);
  const found = locateClaims(
    nodes.map((n) => n.data),
    claims,
  );
  // Last first: splitting a node keeps the offsets of the marks before it in that node valid.
  for (const { claim, node, start, end } of found.reverse()) {
    const text = nodes[node];
    const tail = text.splitText(start);
    tail.splitText(end - start);
    const mark = root.ownerDocument.createElement("span");
    mark.className = CLAIM_CLASS;
    mark.dataset.traced = claim.source ? "true" : "false";
    mark.dataset.kind = claim.kind === "name" ? "name" : "number";
    mark.title = claimTitle(claim);
    tail.replaceWith(mark);
    mark.append(tail);
  }
  return found.length;
}

/** Take the marks out again (their text stays where it was). */
export function unmarkClaims(root) {
  const marks = root.querySelectorAll(`span.${CLAIM_CLASS}`);
  for (const mark of marks) {
    const parent = mark.parentNode;
    mark.replaceWith(...mark.childNodes);
    parent?.normalize();
  }
}

function textNodes(root) {
  const doc = root.ownerDocument;
  const walker = doc.createTreeWalker(root, 4 /* NodeFilter.SHOW_TEXT */, {
    acceptNode: (node) => (node.parentElement?.closest("pre") ? 2 /* REJECT */ : 1 /* ACCEPT */),
  });
  const nodes = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) nodes.push(node);
  return nodes;
}
