// The dashboard's script: polls GET /dashboard/state once a second and draws it (uPlot
// charts of the last two minutes, tiles, near misses, the advisor's findings), and runs the
// playground (streamed chat completions through the model's chat template).
//
// The server keeps no history per viewer: the page keeps the last HISTORY polls and turns the
// cumulative counters of two polls into rates. With --api-key, the key is asked once and kept
// in sessionStorage (this tab only); it is sent as "Authorization: Bearer" on every request.
"use strict";

const POLL_MS = 1000;
const HISTORY = 120;
const KEY_STORAGE = "rapide-api-key";

const $ = (id) => document.getElementById(id);
const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

// ---- API key -------------------------------------------------------------------------------

function apiKey() { return sessionStorage.getItem(KEY_STORAGE) || ""; }

function authHeaders() {
  const key = apiKey();
  return key ? { Authorization: "Bearer " + key } : {};
}

let keyWanted = false;

function showKeyGate(refused) {
  keyWanted = true;
  $("key-gate").hidden = false;
  $("key-error").hidden = !refused;
  $("key-button").hidden = false;
  $("server-state").textContent = "API key needed";
  $("live").hidden = true;
  $("playground").hidden = true;
  $("key-input").focus();
}

function hideKeyGate() {
  $("key-gate").hidden = true;
  showView(currentView);
}

$("key-form").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem(KEY_STORAGE, $("key-input").value.trim());
  $("key-input").value = "";
  keyWanted = false;
  poll();
});
$("key-button").addEventListener("click", () => showKeyGate(false));

// ---- views ---------------------------------------------------------------------------------

let currentView = "live";

function showView(view) {
  currentView = view;
  for (const tab of document.querySelectorAll(".tab")) {
    tab.classList.toggle("active", tab.dataset.view === view);
  }
  if (keyWanted) return;
  $("live").hidden = view !== "live";
  $("playground").hidden = view !== "playground";
  if (view === "live") resizeCharts();
  else updateCurl();
}

for (const tab of document.querySelectorAll(".tab")) {
  tab.addEventListener("click", () => showView(tab.dataset.view));
}

// ---- charts --------------------------------------------------------------------------------

// name -> {plot, data: [times, ...series]}, series: [label, colour variable, value(state, rates)]
const charts = {};

const ms = (x) => (x == null ? null : x * 1000);
const pct = (name, p) => (s) => (s.latency && s.latency[name] ? ms(s.latency[name][p]) : null);

const CHARTS = {
  "c-ttft": [["p50", "--s1", pct("ttft", "p50")], ["p90", "--s2", pct("ttft", "p90")],
             ["p99", "--s6", pct("ttft", "p99")]],
  "c-tpot": [["TPOT p50", "--s1", pct("tpot", "p50")], ["TPOT p99", "--s6", pct("tpot", "p99")],
             ["ITL p50", "--s3", pct("itl", "p50")], ["ITL p99", "--s2", pct("itl", "p99")]],
  "c-tokens": [["in", "--s1", (s, r) => r.in], ["out", "--s3", (s, r) => r.out]],
  "c-requests": [["running", "--s3", (s) => s.requests.running],
                 ["queued", "--s2", (s) => s.requests.waiting]],
  "c-rows": [["prefill", "--s4", (s) => s.steps.prefill_rows],
             ["decode", "--s1", (s) => s.steps.decode_rows]],
  // Free blocks are drawn as a figure, not a line: a large budget would flatten the others.
  "c-kv": [["used", "--s2", (s) => s.kv.used], ["cached", "--s5", (s) => s.kv.cached]],
};

function chartSize(el) {
  return { width: Math.max(200, el.clientWidth), height: 200 };
}

function makeChart(id, series) {
  const el = $(id);
  const axis = { stroke: css("--muted"), grid: { stroke: css("--border"), width: 1 },
                 ticks: { stroke: css("--border"), width: 1 } };
  const opts = {
    ...chartSize(el),
    series: [{}].concat(series.map(([label, colour]) => ({
      label, stroke: css(colour), width: 2, spanGaps: false }))),
    axes: [axis,
           { ...axis, size: 56, values: (u, ticks) => ticks.map(compact) }],
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1e-9, max || 1) * 1.1] } },
    legend: { live: false },
    cursor: { show: false },
  };
  const data = [[]].concat(series.map(() => []));
  charts[id] = { plot: new uPlot(opts, data, el), data, series };
}

function resizeCharts() {
  for (const id in charts) charts[id].plot.setSize(chartSize($(id)));
}
window.addEventListener("resize", resizeCharts);

function pushCharts(state, rates) {
  const now = Date.now() / 1000;
  for (const id in charts) {
    const c = charts[id];
    c.data[0].push(now);
    c.series.forEach(([, , value], i) => c.data[i + 1].push(value(state, rates)));
    if (c.data[0].length > HISTORY) for (const column of c.data) column.shift();
    if (!$("live").hidden) c.plot.setData(c.data);
  }
}

// ---- the state -----------------------------------------------------------------------------

let previous = null;  // the last poll, for rates
let polls = 0;        // polls drawn (the tests watch it)

// Axis labels: 12.5k rather than a number too wide for the axis.
function compact(x) {
  return Math.abs(x) >= 1000 ? (x / 1000).toLocaleString(undefined, { maximumFractionDigits: 1 }) + "k"
                             : x.toLocaleString(undefined, { maximumFractionDigits: 2 });
}

function fmt(x, digits = 0) {
  return x == null || Number.isNaN(x) ? "–" : x.toLocaleString(undefined, {
    minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function rates(state) {
  const r = { in: null, out: null };
  if (previous && previous.tokens && state.tokens && state.time > previous.time) {
    const dt = state.time - previous.time;
    r.in = (state.tokens.prompt_computed - previous.tokens.prompt_computed) / dt;
    r.out = (state.tokens.decoded - previous.tokens.decoded) / dt;
  }
  return r;
}

function drawTiles(s, r) {
  $("t-running").textContent = fmt(s.requests.running);
  $("t-waiting").textContent = fmt(s.requests.waiting);
  $("t-in").textContent = fmt(r.in);
  $("t-out").textContent = fmt(r.out);
  const p = s.prefix_cache;
  $("t-hit").textContent = p.enabled ? fmt(p.hit_rate * 100, 1) + " %" : "cache off";
  $("t-preempt").textContent = fmt(s.preemptions);
  const spec = s.speculative;
  $("t-spec").textContent = spec.enabled
      ? fmt(spec.acceptance * 100, 1) + " % (k " + spec.k + ")" : "not available";
  $("t-kv").textContent = fmt(s.kv.used) + " / " + fmt(s.kv.total);
  $("rows-note").textContent = `${fmt(s.steps.per_second, 1)} steps/s over the last ` +
      `${s.window} s; mean rows per step`;
  $("kv-note").textContent = `${fmt(s.kv.used)} used, ${fmt(s.kv.free)} free (of which ` +
      `${fmt(s.kv.cached)} hold cached prefixes), ${fmt(s.kv.total)} in all`;
  const o = s.offload;
  $("offload").textContent = o.enabled
      ? `offload tier: ${fmt(o.ram_blocks)} blocks in RAM (${fmt(o.ram_bytes / 1048576, 1)} MiB),` +
        ` ${fmt(o.disk_blocks)} on disk (${fmt(o.disk_bytes / 1048576, 1)} MiB);` +
        ` ${fmt(o.stored_blocks)} stored, ${fmt(o.loaded_blocks)} loaded back`
      : "offload tier: off (--kv-offload-ram / --kv-offload-dir)";
}

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text != null) e.textContent = text;
  return e;
}

// The first position where a and b differ, and the end of that differing run: the run is
// what a timestamp or an id changed.
function differingRun(a, b) {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let end = start;
  while (end < a.length && end < b.length && a[end] !== b[end]) end++;
  return [start, Math.max(end, start + 1)];
}

// `before` (the shared text just before the divergence) then `text` with its first differing
// run marked. textContent only: prompt text never becomes markup.
function missText(before, text, [start, end]) {
  const pre = el("pre");
  pre.append(el("span", "muted", before ? "…" + before : ""));
  pre.append(text.slice(0, start));
  pre.append(el("mark", null, text.slice(start, end) || "⏎"));
  pre.append(text.slice(end));
  return pre;
}

let lastMissesKey = "";

function drawNearMisses(misses) {
  const key = misses.map((m) => m.request_id).join(",");
  if (key === lastMissesKey) return;
  lastMissesKey = key;
  const box = $("near-misses");
  box.replaceChildren();
  if (!misses.length) { box.append(el("p", "muted", "none yet")); return; }
  for (const m of misses) {
    const div = el("div", "miss");
    div.append(el("div", "small", `request ${m.request_id}: ${m.matched_tokens} of ` +
        `${m.prompt_tokens} prompt tokens matched a cached prefix, ${m.reused_tokens} reused`));
    const pair = el("div", "pair");
    const run = differingRun(m.prompt, m.cached);
    const left = el("div"), right = el("div");
    left.append(el("span", "small muted", "this prompt"), missText(m.before, m.prompt, run));
    right.append(el("span", "small muted", "cached"), missText(m.before, m.cached, run));
    pair.append(left, right);
    div.append(pair);
    box.append(div);
  }
}

let lastAdvice = "";

function drawAdvice(advice) {
  const text = JSON.stringify(advice);
  if (text === lastAdvice) return;
  lastAdvice = text;
  const box = $("advice");
  box.replaceChildren();
  if (!advice) { box.append(el("p", "muted", "not available yet")); return; }
  if (advice.error) { box.append(el("p", "error", advice.error)); return; }
  const headline = advice.findings.find((f) => f.id === advice.headline);
  box.append(el("p", null, headline ? "First change: " + (headline.lever || headline.title)
                                    : "Nothing to change: no question fires."));
  const quiet = [];
  for (const f of advice.findings) {
    if (!f.fires) { quiet.push(f); continue; }
    const div = el("div", "finding fires" + (f.id === advice.headline ? " headline" : ""));
    div.append(el("strong", null, `${f.question}. ${f.title}`), el("div", null, f.verdict));
    const ul = el("ul");
    for (const e of f.evidence) ul.append(el("li", "small", e));
    div.append(ul);
    if (f.lever) div.append(el("div", null, "→ " + f.lever + (f.available ? "" : " (not in rapide yet)")));
    if (f.effect) div.append(el("div", "small muted", f.effect));
    box.append(div);
  }
  if (quiet.length) {
    const details = el("details");
    details.append(el("summary", "small muted", `${quiet.length} more questions that do not fire`));
    for (const f of quiet) {
      const div = el("div", "finding");
      div.append(el("strong", "small", `${f.question}. ${f.title}: `), el("span", "small", f.verdict));
      details.append(div);
    }
    box.append(details);
  }
}

function draw(state) {
  $("model").textContent = state.model;
  const badge = $("server-state");
  badge.textContent = state.state;
  badge.className = "badge " + state.state;
  if (!state.requests) return;  // loading
  const r = rates(state);
  drawTiles(state, r);
  pushCharts(state, r);
  drawNearMisses(state.prefix_cache.near_misses);
  drawAdvice(state.advice);
  previous = state;
  polls++;
  document.body.dataset.polls = polls;
}

let pollTimer = null;

async function poll() {
  clearTimeout(pollTimer);
  if (keyWanted || document.hidden) return;  // visibilitychange starts it again
  try {
    const response = await fetch("/dashboard/state", { headers: authHeaders(), cache: "no-store" });
    if (response.status === 401) {
      showKeyGate(apiKey() !== "");
      return;
    }
    if (response.ok) {
      if (!$("key-gate").hidden) hideKeyGate();
      draw(await response.json());
    }
  } catch (e) {
    $("server-state").textContent = "unreachable";
    $("server-state").className = "badge";
  }
  // Polling pauses while the tab is hidden: nobody looking costs the server nothing.
  pollTimer = setTimeout(poll, POLL_MS);
}

document.addEventListener("visibilitychange", () => {
  if (!document.hidden) poll();
});

// ---- playground ----------------------------------------------------------------------------

const chat = [];  // {role, content}
let controller = null;

function chatRequest() {
  const messages = [];
  const system = $("chat-system").value.trim();
  if (system) messages.push({ role: "system", content: system });
  messages.push(...chat);
  const pending = $("chat-input").value;
  if (pending.trim()) messages.push({ role: "user", content: pending });
  const body = { model: previous ? previous.model : undefined, messages, stream: true,
                 stream_options: { include_usage: true },
                 temperature: Number($("p-temperature").value),
                 top_p: Number($("p-top-p").value),
                 max_tokens: Number($("p-max-tokens").value) };
  if ($("p-seed").value !== "") body.seed = Number($("p-seed").value);
  return body;
}

function shellQuote(s) { return "'" + s.replaceAll("'", "'\\''") + "'"; }

// The key itself never appears: the command reads it from $RAPIDE_API_KEY.
function updateCurl() {
  const lines = ["curl -N " + location.origin + "/v1/chat/completions",
                 "  -H 'Content-Type: application/json'"];
  if (apiKey()) lines.push("  -H \"Authorization: Bearer $RAPIDE_API_KEY\"");
  lines.push("  -d " + shellQuote(JSON.stringify(chatRequest())));
  $("curl").textContent = lines.join(" \\\n");
}

for (const id of ["chat-system", "chat-input", "p-temperature", "p-top-p", "p-max-tokens", "p-seed"]) {
  $(id).addEventListener("input", updateCurl);
}
$("curl-copy").addEventListener("click", () => {
  navigator.clipboard?.writeText($("curl").textContent).catch(() => {});
});
$("chat-clear").addEventListener("click", () => {
  chat.length = 0;
  $("chat-log").replaceChildren();
  updateCurl();
});
$("chat-stop").addEventListener("click", () => controller?.abort());

function addMessage(role, text) {
  const div = el("div", "msg " + role);
  const content = el("span", "content", text);
  div.append(content);
  $("chat-log").append(div);
  return div;
}

// Reads an SSE body: calls onEvent with each "data:" payload parsed as JSON.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!block.startsWith("data: ")) continue;
      const data = block.slice(6);
      if (data === "[DONE]") return;
      onEvent(JSON.parse(data));
    }
  }
}

$("chat-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const body = chatRequest();
  const text = $("chat-input").value;
  if (!text.trim()) return;
  chat.push({ role: "user", content: text });
  addMessage("user", text);
  $("chat-input").value = "";
  const reply = addMessage("assistant", "");
  reply.dataset.state = "streaming";
  const content = reply.querySelector(".content");
  const timing = el("span", "timing", "waiting…");
  reply.append(timing);
  $("chat-send").disabled = true;
  $("chat-stop").disabled = false;
  controller = new AbortController();
  const sent = performance.now();
  let first = null, last = null, chunks = 0, tokens = null, finish = null;
  try {
    const response = await fetch("/v1/chat/completions", {
      method: "POST", signal: controller.signal,
      headers: { "Content-Type": "application/json", ...authHeaders() },
      body: JSON.stringify(body) });
    if (response.status === 401) { showKeyGate(apiKey() !== ""); throw new Error("API key refused"); }
    if (!response.ok) {
      const err = await response.json().catch(() => ({}));
      throw new Error(err.error?.message || response.statusText);
    }
    await readEvents(response, (event) => {
      if (event.usage) tokens = event.usage.completion_tokens;
      const choice = event.choices?.[0];
      if (!choice) return;
      if (choice.finish_reason) finish = choice.finish_reason;
      const delta = choice.delta?.content;
      if (!delta) return;
      const now = performance.now();
      if (first == null) first = now;
      last = now;
      chunks++;
      reply.dataset.chunks = chunks;  // how many pieces the reply arrived in (tests read it)
      content.textContent += delta;
    });
    reply.dataset.state = "done";
  } catch (err) {
    reply.dataset.state = "failed";
    content.append(el("span", "error", (content.textContent ? "\n" : "") + err.message));
  }
  chat.push({ role: "assistant", content: content.textContent });
  const n = tokens ?? chunks;
  const parts = [];
  if (first != null) parts.push(`TTFT ${fmt(first - sent)} ms`);
  if (first != null && n > 1) parts.push(`TPOT ${fmt((last - first) / (n - 1), 2)} ms`);
  parts.push(`${n} tokens`);
  if (finish) parts.push(finish);
  timing.textContent = parts.join(" · ");
  $("chat-send").disabled = false;
  $("chat-stop").disabled = true;
  controller = null;
  updateCurl();
});

// ---- start ---------------------------------------------------------------------------------

for (const id in CHARTS) makeChart(id, CHARTS[id]);
updateCurl();
poll();
