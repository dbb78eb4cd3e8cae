// ctxrag's search page: asks the service's own endpoints (/indexes, /search, /lines, /evaluation) with the token the
// user gave once (kept in this tab's sessionStorage), and builds every element from text nodes: hits are untrusted
// text, so nothing the service answers is ever parsed as HTML.
"use strict";

const TOKEN_KEY = "ctxrag-search-token";
const AROUND = 10; // lines shown before and after a chunk when its file's lines are opened
const SHOWN_MARK = "ctxrag-hits-shown"; // performance.measure names: request to hits in the page, and painted
const PAINTED_MARK = "ctxrag-hits-painted";

const $ = (id) => document.getElementById(id);
const state = { indexes: [], defaultIndex: "", searches: 0, evaluations: 0, chartUrl: null };

class Refused extends Error {
  constructor(message, status, kind) {
    super(message);
    this.status = status;
    this.kind = kind;
  }
}

// An element with attributes (properties for on* handlers and booleans) and children (text or elements).
function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (value === true) node.setAttribute(name, "");
    else node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function say(message) { $("summary").textContent = message; }
function complain(message) { $("problem").textContent = message; }

// --- the token ---------------------------------------------------------------------------------------------------

function askForToken(why) {
  sessionStorage.removeItem(TOKEN_KEY);
  $("forget").hidden = true;
  $("search-form").hidden = true;
  $("token-form").hidden = false;
  $("token-error").textContent = why || "";
  $("token").value = "";
  $("token").focus();
}

async function useToken(event) {
  event.preventDefault();
  const given = $("token").value.trim();
  if (!given) return;
  sessionStorage.setItem(TOKEN_KEY, given);
  $("token").value = "";
  await start("The service refused that token: check the file its start line names.");
}

function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  location.reload();
}

// --- the service's endpoints -------------------------------------------------------------------------------------

async function ask(path, options) {
  const headers = new Headers((options && options.headers) || {});
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.set("Authorization", "Bearer " + token);
  const response = await fetch(path, { ...options, headers, cache: "no-store", credentials: "omit" });
  if (!response.ok) {
    let message = `the service answered HTTP ${response.status}`;
    let kind = "";
    try {
      const body = await response.json();
      message = body.error.message;
      kind = body.error.kind;
    } catch (ignored) { /* not the error object: keep the status */ }
    throw new Refused(message, response.status, kind);
  }
  return response;
}

async function json(path, options) {
  return (await ask(path, options)).json();
}

function query(parameters) {
  return new URLSearchParams(Object.entries(parameters).filter(([, value]) => value !== null && value !== undefined));
}

// --- start: the indexes (or the token question) --------------------------------------------------------------------

async function start(refusal) {
  try {
    const listed = await json("indexes");
    state.indexes = listed.indexes;
    state.defaultIndex = listed.default || "";
  } catch (error) {
    if (error.status === 401) {
      askForToken(sessionStorage.getItem(TOKEN_KEY) ? refusal || "The service refused the token." : "");
      return;
    }
    complain("The index list could not be read: " + error.message);
    return;
  }
  $("token-form").hidden = true;
  $("token-error").textContent = "";
  $("forget").hidden = !sessionStorage.getItem(TOKEN_KEY);
  $("search-form").hidden = false;
  const select = $("index");
  select.replaceChildren(
    ...state.indexes.map((entry) =>
      el("option", { value: entry.name, selected: entry.name === state.defaultIndex },
        `${entry.name} (${entry.documents ?? "?"} files, ${entry.chunks ?? "?"} chunks)`))
  );
  if (!state.indexes.length) {
    complain("This home has no index: `ctxrag index FOLDER --name NAME` makes one.");
  }
  indexChosen();
  $("query").focus();
}

function chosenIndex() {
  return state.indexes.find((entry) => entry.name === $("index").value);
}

function indexChosen() {
  const entry = chosenIndex();
  $("strategy").options[0].textContent = entry ? `the index's own (${entry.strategy})` : "the index's own";
  showEvaluation(entry ? entry.name : null);
}

// --- search ------------------------------------------------------------------------------------------------------

async function search(event) {
  event.preventDefault();
  const text = $("query").value.trim();
  if (!text) {
    say("Type a question first.");
    $("query").focus();
    return;
  }
  const number = ++state.searches;
  if (number % 1000 === 0) performance.clearMeasures(); // a tab searched all day keeps no more than this
  const began = `ctxrag-search-${number}`;
  performance.mark(began);
  const request = { query: text, index: $("index").value, k: Number($("k").value) || 10, per_file: $("per-file").checked };
  if ($("strategy").value) request.strategy = $("strategy").value;
  complain("");
  say("Searching…");
  let answer;
  try {
    answer = await json("search", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(request),
    });
  } catch (error) {
    if (number !== state.searches) return;
    say("The search failed.");
    if (error.status === 401) askForToken("The service no longer accepts the token: give it again.");
    else complain(error.message);
    return;
  }
  if (number !== state.searches) return; // a later search was asked meanwhile: its answer is the one to show
  showHits(answer, text);
  performance.measure(SHOWN_MARK, began);
  requestAnimationFrame(() => setTimeout(() => {
    performance.measure(PAINTED_MARK, began);
    performance.clearMarks(began);
  }, 0));
  $("results").dataset.answered = String(number);
}

function showHits(answer, text) {
  const files = new Map(); // source -> its hits, in the order of their best rank
  for (const hit of answer.hits) {
    if (!files.has(hit.source)) files.set(hit.source, []);
    files.get(hit.source).push(hit);
  }
  const hits = answer.hits.length;
  const summary = hits
    ? `${hits} ${hits === 1 ? "hit" : "hits"} in ${files.size} ${files.size === 1 ? "file" : "files"} for “${text}”`
    : `No hit for “${text}”`;
  say(`${summary} · index ${answer.index}, version ${answer.version}, ${answer.strategy}`);
  $("summary").classList.remove("muted");
  $("files").replaceChildren(...[...files].map(([source, found]) => fileItem(answer.index, source, found)));
}

function fileItem(index, source, hits) {
  const language = hits[0].language;
  return el("li", { class: "file" },
    el("h3", {}, el("span", { class: "source" }, source), language ? el("span", { class: "language" }, language) : null),
    el("ol", { class: "hits" }, hits.map((hit) => hitItem(index, hit))));
}

function hitItem(index, hit) {
  const lines = hit.location.lines;
  const region = el("div", { class: "lines", id: `lines-${hit.rank}`, hidden: true });
  const opener = el("button", { type: "button", "aria-expanded": "false", "aria-controls": region.id },
    openLabel(lines));
  if (lines) opener.dataset.lines = `${lines[0]}-${lines[1]}`;
  opener.addEventListener("click", () => toggleLines(index, hit, opener, region, lines));
  const also = hit.also.map((range) => {
    const button = el("button", { type: "button", "aria-controls": region.id }, `lines ${range[0]}-${range[1]}`);
    button.addEventListener("click", () => openLines(index, hit, button, region, range));
    return button;
  });
  return el("li", { class: "hit" },
    el("div", { class: "place" },
      el("span", { class: "rank" }, `#${hit.rank}`),
      el("span", { class: "where" }, hit.place),
      el("span", { class: "found" }, `found by ${hit.found_by.join(" + ") || "?"} · score ${hit.score.toFixed(3)}`)),
    hit.matches.length ? codeBlock(hit.matches, { label: `Matched lines of ${hit.place}` }) : null,
    el("div", { class: "actions" }, opener, also.length ? [el("span", { class: "muted" }, "Also in this file:"), also] : null),
    region);
}

// --- a file's lines ------------------------------------------------------------------------------------------------

async function toggleLines(index, hit, opener, region, lines) {
  if (opener.getAttribute("aria-expanded") === "true") {
    closeLines(opener, region);
    return;
  }
  await openLines(index, hit, opener, region, lines);
}

function openLabel(lines) {
  return lines ? `Open lines ${lines[0]}-${lines[1]} in the file` : "Show the whole chunk";
}

function closeLines(opener, region) {
  region.hidden = true;
  region.replaceChildren();
  opener.setAttribute("aria-expanded", "false");
  opener.textContent = openLabel(opener.dataset.lines ? opener.dataset.lines.split("-").map(Number) : null);
  opener.focus();
}

async function openLines(index, hit, opener, region, range, whole) {
  const owner = region.parentElement.querySelector("button[aria-expanded]");
  let content;
  if (!range) {
    content = codeBlock(splitLines(hit.content).map((text) => ({ line: null, text, spans: [] })), {
      label: `The whole chunk of ${hit.place}`, focusable: true,
    });
  } else {
    const first = whole ? 1 : Math.max(1, range[0] - AROUND);
    const last = whole ? null : range[1] + AROUND;
    let found;
    try {
      found = await json("lines?" + query({ index, source: hit.source, first, last }));
    } catch (error) {
      if (error.status === 401) askForToken("The service no longer accepts the token: give it again.");
      else complain(`${hit.source}: ${error.message}`);
      return;
    }
    const matched = new Map(hit.matches.filter((match) => match.line !== null).map((match) => [match.line, match.spans]));
    const rows = found.lines.map((row) => ({
      line: row.line, text: row.text, spans: matched.get(row.line) || [], inChunk: row.line >= range[0] && row.line <= range[1],
    }));
    const more = found.first > 1 || found.last < found.total;
    const wholeButton = more && !whole && found.total <= 1000
      ? el("button", { type: "button" }, `Whole file (${found.total} lines)`) : null;
    if (wholeButton) wholeButton.addEventListener("click", () => openLines(index, hit, opener, region, range, true));
    content = [
      el("div", { class: "lines-head" },
        `${found.source}: lines ${found.first}-${found.last} of ${found.total}, as indexed (version ${found.version})`,
        wholeButton),
      codeBlock(rows, { label: `${found.source}, lines ${found.first} to ${found.last}`, focusable: true }),
    ];
  }
  region.replaceChildren(...[content].flat());
  region.hidden = false;
  if (owner) {
    owner.setAttribute("aria-expanded", "true");
    owner.textContent = owner.dataset.lines ? "Close the file's lines" : "Hide the chunk";
  }
  const block = region.querySelector(".code");
  block.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      closeLines(owner || opener, region);
    }
  });
  const first = region.querySelector(".in-chunk");
  if (first) block.scrollTop = Math.max(0, first.offsetTop - block.offsetTop - 40);
  block.focus();
}

function splitLines(text) {
  const lines = text.split("\n");
  if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
  return lines;
}

// Lines as rows of a number and a text whose spans (in code points, as the service counts them) are marked.
function codeBlock(rows, options) {
  return el("div", {
    class: "code", role: "region", "aria-label": options.label, tabindex: options.focusable ? "0" : null,
  }, rows.map((row) => el("div", { class: "row" + (row.inChunk ? " in-chunk" : "") },
    el("span", { class: "number" }, row.line === null ? "" : String(row.line)),
    el("span", { class: "text" }, marked(row.text, row.spans)))));
}

function marked(text, spans) {
  if (!spans || !spans.length) return [text];
  const points = Array.from(text);
  const parts = [];
  let at = 0;
  for (const [start, end] of [...spans].sort((a, b) => a[0] - b[0])) {
    if (start < at || end <= start) continue;
    parts.push(points.slice(at, start).join(""), el("mark", {}, points.slice(start, end).join("")));
    at = end;
  }
  parts.push(points.slice(at).join(""));
  return parts.filter((part) => part !== "");
}

// --- the latest evaluation -----------------------------------------------------------------------------------------

async function showEvaluation(name) {
  const body = $("evaluation-body");
  const number = ++state.evaluations;
  if (state.chartUrl) URL.revokeObjectURL(state.chartUrl);
  state.chartUrl = null;
  if (!name) {
    body.replaceChildren(el("p", { class: "muted" }, "Choose an index."));
    return;
  }
  let found;
  try {
    found = await json("evaluation?" + query({ index: name }));
  } catch (error) {
    if (number === state.evaluations) body.replaceChildren(el("p", { class: "error" }, error.message));
    return;
  }
  if (number !== state.evaluations) return;
  const run = found.run;
  if (!run) {
    body.replaceChildren(el("p", { class: "muted" }, `${name} has no evaluation yet: `,
      el("code", {}, `ctxrag evaluate QUESTIONS --name ${name}`), " scores every strategy on your questions."));
    return;
  }
  const live = chosenIndex();
  const names = [...new Set(run.metrics.flatMap((row) => Object.keys(row).filter((key) => key !== "strategy")))];
  const table = el("table", {},
    el("caption", {}, `${run.evalset.split("/").pop()} (${run.format}); the index's own strategy in bold`),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "strategy"), names.map((metric) => el("th", { scope: "col" }, metric)))),
    el("tbody", {}, run.metrics.map((row) => el("tr", { class: row.strategy === run.index_strategy ? "own" : null },
      el("th", { scope: "row" }, row.strategy),
      names.map((metric) => el("td", {}, typeof row[metric] === "number" ? row[metric].toFixed(3) : "–"))))));
  const version = run.version && live && run.version !== live.version
    ? `version ${run.version} (the live one is ${live.version})` : "the live version";
  const parts = [
    el("p", {}, `${run.created_at.replace("T", " ")}, ${version}: `, el("code", {}, run.run)),
    el("div", { class: "table-wrap", role: "region", "aria-label": "Metrics per strategy", tabindex: "0" }, table),
  ];
  body.replaceChildren(...parts);
  if (run.chart) {
    try {
      const image = await (await ask("evaluation/chart?" + query({ index: name, run: run.run }))).blob();
      if (number !== state.evaluations) return;
      state.chartUrl = URL.createObjectURL(image);
      body.append(el("a", { href: state.chartUrl, target: "_blank", rel: "noopener", class: "chart-link" },
        el("img", { class: "chart", src: state.chartUrl, alt: "Chart of the metrics in the table above (opens at full size)" })));
    } catch (error) {
      body.append(el("p", { class: "error" }, "The chart could not be read: " + error.message));
    }
  }
}

// --- wiring --------------------------------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("token-form").addEventListener("submit", useToken);
  $("search-form").addEventListener("submit", search);
  $("forget").addEventListener("click", forgetToken);
  $("index").addEventListener("change", indexChosen);
  start();
});
