// A starter agent speaking the adapter protocol, version 1 (docs/adapter-protocol.md), with
// the recovery the suite judges (docs/judged-on.md). Plain Node 18+, no npm dependency: the
// global fetch, one file. Usage: conformance run --agent "cmd:node examples/node-agent/agent.mjs"
import { setMaxListeners } from "node:events";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import readline from "node:readline";

// --- What the agent is judged on (docs/judged-on.md): numbers and exact strings ------------
const BACKOFF_BASE_S = 0.5; // RTY-03: retry n waits min(32, 0.5 * 2^(n-1)) s ...
const BACKOFF_CAP_S = 32;
const JITTER = 0.25; // ... times a uniform draw in [0.75, 1.25]
const RETRY_BUDGET = 10; // RTY-04: 10 retries (11 attempts) per request and mode
const MAX_SERVER_WAIT_S = 300; // RTY-14: a longer Retry-After is surfaced, not slept
const MAX_RECOVERIES = 3; // TRN-04: consecutive length continuations
const OUTPUT_LIMIT_CHARS = 30000; // FMT-01: longer tool output is cut, with a notice
const LOOP_WINDOW = 5; // LOP-01: the same failing call 3 times within 5 calls
const LOOP_THRESHOLD = 3;
const CONTINUATION_TEXT = // TRN-01, exactly (note the em dash)
  "Output token limit hit. Resume directly \u2014 no apology, no recap of what you were doing. " +
  "Pick up mid-thought if that is where the cut happened. Break remaining work into smaller pieces.";
const TRUNCATION_HINT = "(output truncated, please reduce your output)"; // TJS-01
const RETRYABLE = new Set([408, 409, 429, 500, 502, 503, 504, 529]); // RTY-03/05/16
// --- The agent's own choices (within what is judged) ---------------------------------------
const IDLE_TIMEOUT_S = 60; // STR-10: a stream silent this long is abandoned
const DEFAULT_TOOL_TIMEOUT_S = 120; // without config.tool_timeout_s
const DEFAULT_MAX_TOKENS = 8192; // TRN-07: raised once to ESCALATED_MAX_TOKENS on a length finish
const ESCALATED_MAX_TOKENS = 32768;

const BASE = process.env.OPENAI_BASE_URL;
const KEY = process.env.OPENAI_API_KEY || "";
const user = new AbortController(); // the user's Esc: aborts every request and wait
setMaxListeners(0, user.signal); // one listener per request and wait: no leak warning
let scale = 1, debugDir = null, shownSeq = 0;

// DBG-02: whatever a server echoes, the key never leaves this process.
const redact = (s) => (KEY ? String(s).split(KEY).join("[REDACTED]") : String(s));
// DBG-01, DBG-03 (capability debug_dump): files in start.debug_dir, redacted like the rest.
function dump(name, record, append = false) {
  if (!debugDir) return;
  try {
    fs.mkdirSync(debugDir, { recursive: true });
    fs[append ? "appendFileSync" : "writeFileSync"](path.join(debugDir, name), redact(JSON.stringify(record)) + "\n");
  } catch (e) {
    log("debug dump failed:", e.message);
  }
}
const emit = (ev) => process.stdout.write(redact(JSON.stringify(ev)) + "\n");
const log = (...a) => process.stderr.write(redact(a.join(" ")) + "\n");

class ApiError extends Error {
  constructor(kind, message, retryable = false, waitS = null) {
    super(message);
    Object.assign(this, { kind, retryable, waitS, at: performance.now() }); // when it failed
  }
}
class Aborted extends Error {}

// --- The protocol: hello first, then start, then events until turn_end ---------------------
emit({ type: "hello", agent: "node-starter", version: "1.0.0", capabilities: ["tools", "abort", "time_scale", "debug_dump"] });
// Node's fetch is slow on its first calls (its code is compiled then): tens of ms on a busy
// machine. At a fast test clock (time_scale 0.02) the first retry waits 10 ms, so warm it up
// on a throwaway local server; at real time this changes nothing.
const warm = http.createServer((q, a) => q.resume().on("end", () => a.writeHead(429).end("{}")));
await new Promise((done) => warm.listen(0, "127.0.0.1", done));
for (let i = 0; i < 4; i++) await (await fetch(`http://127.0.0.1:${warm.address().port}/`, { method: "POST", body: "{}" })).text();
warm.close();
const rl = readline.createInterface({ input: process.stdin });
let started = false;
rl.on("line", (line) => {
  const msg = JSON.parse(line);
  if (msg.type === "start" && !started) {
    started = true;
    runTurn(msg).then(
      (reason) => emit({ type: "turn_end", reason }),
      (err) => {
        if (user.signal.aborted || err instanceof Aborted) return emit({ type: "turn_end", reason: "aborted" });
        const kind = err instanceof ApiError ? err.kind : "server"; // ERR-01: a typed kind
        emit({ type: "error", kind, message: String(err.message) });
        emit({ type: "turn_end", reason: "error" });
      },
    );
  } else if (msg.type === "abort") user.abort();
});
rl.on("close", () => process.exit(0));

// A signal aborted when either is (AbortSignal.any is Node 20.3+ only).
function either(a, b) {
  const c = new AbortController();
  for (const s of [a, b]) {
    if (s.aborted) c.abort();
    else s.addEventListener("abort", () => c.abort(), { once: true });
  }
  return c.signal;
}

const sleep = (s) =>
  new Promise((resolve, reject) => {
    if (user.signal.aborted) return reject(new Aborted());
    const t = setTimeout(resolve, s * scale * 1000);
    user.signal.addEventListener("abort", () => (clearTimeout(t), reject(new Aborted())), { once: true });
  });

// --- One model request: retries, then the non-streaming fallback (RTY, STR) ----------------
function kindOf(status, text) {
  if (status === null) return "connection";
  if (/context_length_exceeded|prompt is too long|maximum context length/i.test(text)) return "prompt_too_long";
  if (status === 429) return "rate_limit";
  if (status === 529 || /overloaded/i.test(text)) return "overloaded";
  return { 401: "auth", 403: "permission", 404: "not_found", 408: "timeout", 413: "media_too_large" }[status] ||
    (status >= 500 ? "server" : "bad_request");
}

function serverWait(headers) {
  // RTY-13: retry-after-ms first; RTY-01: Retry-After in seconds; RTY-02: an HTTP-date.
  const ms = headers.get("retry-after-ms");
  if (ms !== null && isFinite(Number(ms))) return Number(ms) / 1000;
  const ra = headers.get("retry-after");
  if (ra === null) return null;
  if (isFinite(Number(ra))) return Number(ra);
  const at = Date.parse(ra);
  return isNaN(at) ? null : Math.max(0, (at - Date.now()) / 1000);
}

// One attempt. Resolves {message, finish, usage}; throws ApiError (retryable or not).
async function attempt(body, stream, cfg) {
  const ctl = new AbortController();
  const signal = either(user.signal, ctl.signal);
  let timer = null;
  if (cfg.request_timeout_s) timer = setTimeout(() => ctl.abort(), cfg.request_timeout_s * scale * 1000);
  let r;
  try {
    r = await fetch(`${BASE}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
      body: redact(JSON.stringify({ ...body, stream })),
      signal,
    });
  } catch (e) {
    if (user.signal.aborted) throw new Aborted();
    const timedOut = ctl.signal.aborted; // (request_timeout_s)
    throw new ApiError(timedOut ? "timeout" : "connection", timedOut ? "no response headers in time" : `connection failed (${e.cause?.code || e.message})`, true);
  } finally {
    clearTimeout(timer);
  }
  if (r.status !== 200) {
    const at = performance.now(); // the backoff runs from here, not from the body's end
    const text = redact(await r.text().catch(() => ""));
    const wait = serverWait(r.headers);
    const kind = kindOf(r.status, text);
    if (r.status === 400) dump(`http-400-${Date.now()}.json`, { messages: body.messages, model: body.model, config: { max_tokens: body.max_tokens, stream }, error: text });
    throw Object.assign(new ApiError(kind, `HTTP ${r.status}: ${text.slice(0, 300)}`, RETRYABLE.has(r.status), wait), { at });
  }
  const fail = (m) => Object.assign(new ApiError("server", m, true), { midStream: true });
  if (!stream) {
    const data = await r.json().catch(() => null);
    if (!data) throw new ApiError("server", "unreadable reply body", true);
    if (data.error) throw new ApiError(kindOf(200, JSON.stringify(data.error)), redact(data.error.message || "error in reply"), true);
    const choice = (data.choices || [])[0];
    if (!choice) throw new ApiError("server", "empty reply (no choices)", true);
    const m = choice.message || {};
    return { text: m.content || "", reasoning: m.reasoning_content || "", calls: (m.tool_calls || []).map((c) => ({ id: c.id, name: c.function?.name || "", args: c.function?.arguments ?? "" })), finish: choice.finish_reason, usage: data.usage };
  }
  // SSE: "data: {json}" lines; a failure after the headers is a mid-stream failure (STR-01).
  const out = { id: `m${++shownSeq}`, text: "", reasoning: "", calls: [], finish: null, usage: null };
  let shown = false; // STR-02: what was shown of a stream that then fails is withdrawn by id
  const decoder = new TextDecoder();
  const reader = r.body.getReader();
  let buf = "", lastEvent = Date.now(); // keep-alive comments do not feed the idle watchdog
  try {
    for (;;) {
      let idle;
      const left = IDLE_TIMEOUT_S * scale * 1000 - (Date.now() - lastEvent);
      const chunk = await Promise.race([
        reader.read(),
        new Promise((_, rej) => (idle = setTimeout(() => rej(fail("stream idle for too long")), left))),
      ]).finally(() => clearTimeout(idle));
      if (chunk.done) break;
      buf += decoder.decode(chunk.value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        lastEvent = Date.now();
        if (data === "[DONE]") continue;
        let ev;
        try { ev = JSON.parse(data); } catch { throw fail("malformed stream event"); } // STR-14
        if (ev.error) throw fail(`error in stream: ${redact(ev.error.message || "")}`); // STR-15
        if (ev.usage) out.usage = ev.usage;
        for (const ch of ev.choices || []) {
          out.text += ch.delta?.content || "";
          out.reasoning += ch.delta?.reasoning_content || "";
          for (const tc of ch.delta?.tool_calls || []) {
            const c = (out.calls[tc.index ?? 0] ||= { id: "", name: "", args: "" });
            c.id = tc.id || c.id;
            c.name += tc.function?.name || "";
            c.args += tc.function?.arguments || "";
          }
          if (ch.finish_reason) out.finish = ch.finish_reason;
        }
        if (!shown && out.text) {
          shown = true;
          emit({ type: "message", id: out.id, role: "assistant", text: out.text, tool_calls: [] });
        }
      }
    }
  } catch (e) {
    reader.cancel().catch(() => {});
    if (user.signal.aborted) throw new Aborted();
    if (out.finish && !(e instanceof ApiError)) return { ...out, calls: out.calls.filter(Boolean) }; // STR-13: [DONE] missing
    if (shown) emit({ type: "removed", id: out.id });
    throw e instanceof ApiError ? e : fail(`stream broken (${e.message})`);
  }
  if (!out.finish) {
    if (shown) emit({ type: "removed", id: out.id });
    throw fail("stream ended without finish_reason"); // STR-08
  }
  return { ...out, calls: out.calls.filter(Boolean) };
}

// A request in one mode, retried up to RETRY_BUDGET times with backoff (same body: RTY-12).
async function inMode(body, stream, cfg, tried) {
  for (let n = 0; ; n++) {
    try {
      const reply = await attempt(body, stream, cfg);
      if (!reply.text && !reply.reasoning && !reply.calls.length && reply.finish !== "length")
        throw new ApiError("server", "empty reply", true); // STR-16: retried, within the budget
      return reply;
    } catch (e) {
      if (!(e instanceof ApiError) || !e.retryable || e.midStream || n >= RETRY_BUDGET) throw e;
      if (e.waitS !== null && e.waitS > MAX_SERVER_WAIT_S)
        throw new ApiError(e.kind, `${e.message} (the server asked to wait ${e.waitS} s; not retried)`);
      const nominal = Math.min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** n);
      const delay = e.waitS ?? nominal * (1 - JITTER + 2 * JITTER * Math.random());
      tried.retries++;
      emit({ type: "retry", attempt: n + 1, delay_s: delay, reason: e.message.slice(0, 200) });
      await sleep(Math.max(0, delay - (performance.now() - e.at) / 1000 / scale));
    }
  }
}

// Streaming first; a stream that fails, or whose retries run out, is sent once more with
// stream: false, which retries fully in its turn (STR-01, STR-05). Never after an abort.
async function complete(body, cfg) {
  const tried = { retries: 0, fallback: false };
  try {
    try {
      return await inMode(body, true, cfg, tried);
    } catch (e) {
      if (!(e instanceof ApiError) || !(e.retryable || e.midStream) || cfg.stream_fallback === false) throw e;
      log("stream failed, falling back to non-streaming:", e.message);
      tried.fallback = true;
      return await inMode(body, false, cfg, tried);
    }
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    const how = [tried.retries && `${tried.retries} retries`, tried.fallback && "a non-streaming fallback"].filter(Boolean);
    throw new ApiError(e.kind, e.message + (how.length ? ` (after ${how.join(" and ")})` : "")); // ERR-04
  }
}

// --- Tools (TJS, TOL, FMT, LOP) -----------------------------------------------------------
// Close an unterminated string and unclosed braces, nothing else (TJS-02); never a '[' (TJS-03).
function closeTruncated(text) {
  const stack = [];
  let inStr = false, esc = false;
  for (const ch of text) {
    if (inStr) {
      if (esc) esc = false;
      else if (ch === "\\") esc = true;
      else if (ch === '"') inStr = false;
    } else if (ch === '"') inStr = true;
    else if (ch === "{" || ch === "[") stack.push(ch);
    else if (ch === "}" || ch === "]") stack.pop();
  }
  if (!stack.length || stack.includes("[")) return null;
  return (inStr ? (esc ? text.slice(0, -1) : text) + '"' : text) + "}".repeat(stack.length);
}

const TYPES = { string: (v) => typeof v === "string", integer: Number.isInteger, number: (v) => typeof v === "number", boolean: (v) => typeof v === "boolean", array: Array.isArray, object: (v) => v !== null && typeof v === "object" && !Array.isArray(v) };

// TOL-02: name each wrong field and what it expects. TJS-06: decode JSON text where an object is due.
function checkArgs(args, schema) {
  const props = schema?.properties || {};
  const problems = [];
  for (const field of schema?.required || []) if (!(field in args)) problems.push(`missing required field '${field}' (expected type ${props[field]?.type || "any"})`);
  for (const [field, value] of Object.entries(args)) {
    const p = props[field];
    if (!p) continue;
    if ((p.type === "object" || p.type === "array") && typeof value === "string") {
      try { const v = JSON.parse(value); if (TYPES[p.type](v)) args[field] = v; } catch {}
    }
    if (p.type && TYPES[p.type] && !TYPES[p.type](args[field])) problems.push(`field '${field}': expected type ${p.type}, got ${JSON.stringify(args[field])}`);
    else if (p.enum && !p.enum.includes(args[field])) problems.push(`field '${field}': expected one of ${p.enum.map((v) => JSON.stringify(v)).join(", ")}, got ${JSON.stringify(args[field])}`);
  }
  return problems;
}

function distance(a, b) {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
  return d[a.length][b.length];
}

// FMT-01: keep head and tail around a notice giving the full size.
function capOutput(text) {
  if (text.length <= OUTPUT_LIMIT_CHARS) return text;
  const keep = OUTPUT_LIMIT_CHARS - 200, head = Math.floor(keep * 0.6), tail = keep - head;
  const notice = `\n\n[... output truncated: ${text.length} characters in total, ${text.length - head - tail} characters omitted ...]\n\n`;
  return text.slice(0, head) + notice + text.slice(text.length - tail);
}

// Parse, check and run one call; resolves {status, output}.
async function runTool(start, call, truncated) {
  const spec = (start.tools || []).find((t) => t.name === call.name);
  if (!spec) {
    const names = (start.tools || []).map((t) => t.name);
    const near = [...names].sort((a, b) => distance(call.name, a) - distance(call.name, b))[0];
    return { status: "error", output: `Error: unknown tool '${call.name}'. Available tools: ${names.join(", ")}.${near ? ` Did you mean '${near}'?` : ""}` };
  }
  let args, warning = "";
  try {
    args = call.args === "" ? {} : JSON.parse(call.args);
    if (typeof args === "string") args = JSON.parse(args); // TJS-06: arguments sent as JSON text
  } catch (e) {
    const closed = truncated ? closeTruncated(call.args) : null;
    try {
      if (closed === null) throw e;
      args = JSON.parse(closed);
      warning = `\n[warning] the arguments were cut short and repaired; check the result. ${TRUNCATION_HINT}`;
    } catch {
      return { status: "error", output: `Error: the arguments of ${call.name} are not valid JSON${truncated ? ` ${TRUNCATION_HINT}` : ""}` };
    }
  }
  if (!TYPES.object(args)) return { status: "error", output: `Error: the arguments of ${call.name} must be a JSON object` };
  const problems = checkArgs(args, spec.parameters);
  if (problems.length) return { status: "error", output: `Error: invalid arguments for ${call.name}: ${problems.join("; ")}` };
  const limit = start.config?.tool_timeout_s ?? DEFAULT_TOOL_TIMEOUT_S;
  for (let tries = 0; ; tries++) {
    let body, timedOut = false;
    const ctl = new AbortController();
    const timer = setTimeout(() => ((timedOut = true), ctl.abort()), limit * scale * 1000);
    try {
      const r = await fetch(`${start.tool_endpoint}/${call.name}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ call_id: call.id, arguments: args }),
        signal: either(user.signal, ctl.signal),
      });
      body = await r.json();
    } catch (e) {
      if (user.signal.aborted) throw new Aborted();
      if (timedOut) return { status: "error", output: `Error: ${call.name} timed out after ${limit} s (the tool time limit) and was stopped` }; // TOL-04
      return { status: "error", output: `Error: ${call.name} failed: ${e.message}` };
    } finally {
      clearTimeout(timer);
    }
    const err = body.error;
    if (err && (err.type === "transient" || err.type === "timeout") && tries < 2) continue; // TOL-07
    if (err?.type === "permission_denied") return { status: "error", output: `Error: permission denied: ${err.message}. Ask the user to grant permission for this action; do not retry it.` }; // TOL-05
    if (err) return { status: "error", output: `Error: ${err.message || err.type}` };
    return { status: "ok", output: capOutput(String(body.output ?? "")) + warning };
  }
}

// LOP-01: the same failing call LOOP_THRESHOLD times within the last LOOP_WINDOW calls.
// LOP-02: the same call right after its reminder takes the tool away for 3 requests.
function loopReminder(history, call, failed, blocked) {
  const key = `${call.name}\u0000${call.args}`;
  if (history.warned === key) {
    blocked[call.name] = 3;
    history.warned = null;
    history.push({ key, failed });
    return `<system-reminder>You called ${call.name} again with the same arguments after being told not to. ${call.name} is unavailable for the next 3 requests; use a different approach.</system-reminder>`;
  }
  history.warned = null;
  history.push({ key, failed });
  const same = history.slice(-LOOP_WINDOW).filter((c) => c.failed && c.key === key).length;
  if (!failed || same < LOOP_THRESHOLD) return null;
  history.warned = key;
  return `<system-reminder>You have called ${call.name} ${same} times with the same arguments, and it failed each time. Do NOT call it again with the same arguments: read the error and try a different approach.</system-reminder>`;
}

// LOP-06: the same text 3 times in a row, or calls alternating A-B-A-B, is a loop: say so.
function loopNote(texts, calls, reply) {
  const t = texts.slice(-3), k = calls.slice(-4).map((c) => c.key);
  if (t.length === 3 && t[0] && t.every((x) => x === t[0]))
    return "<system-reminder>You have written the same text 3 times in a row. Stop repeating it and try a different approach.</system-reminder>";
  if (reply.calls.length && k.length === 4 && k[0] === k[2] && k[1] === k[3] && k[0] !== k[1])
    return "<system-reminder>You are alternating between the same two tool calls without progress. Stop and try a different approach.</system-reminder>";
  return null;
}

// --- The turn (TRN, RSN, CTX, LOP-03) ------------------------------------------------------
// CTX-03: every tool call in history gets a result; RSN-03/04: no empty assistant message.
function repairHistory(history) {
  const out = [];
  for (let i = 0; i < history.length; i++) {
    const m = history[i];
    if (m.role === "assistant" && !m.content && !m.tool_calls?.length) {
      if (!m.reasoning_content) continue;
      out.push({ ...m, content: "(reasoning only)" });
      continue;
    }
    out.push(m);
    if (m.role !== "assistant" || !m.tool_calls?.length) continue;
    const answered = new Set();
    for (let j = i + 1; j < history.length && history[j].role === "tool"; j++) answered.add(history[j].tool_call_id);
    const pending = m.tool_calls.filter((c) => !answered.has(c.id));
    while (i + 1 < history.length && history[i + 1].role === "tool") out.push(history[++i]);
    for (const c of pending) out.push({ role: "tool", tool_call_id: c.id, content: "[no result: the tool call was interrupted]" });
  }
  return out;
}

async function runTurn(start) {
  scale = start.time_scale || 1;
  debugDir = start.debug_dir || null;
  const cfg = start.config || {};
  const tools = (start.tools || []).map((t) => ({ type: "function", function: t }));
  const messages = [...repairHistory(start.history || []), { role: "user", content: start.prompt }];
  const userLimit = cfg.max_output_tokens ?? null;
  let maxTokens = userLimit ?? DEFAULT_MAX_TOKENS;
  let recoveries = 0, toolCalls = 0, step = 0;
  const calls = [], texts = [], blocked = {};
  for (;;) {
    const body = { model: start.model, messages, max_tokens: maxTokens };
    const offered = tools.filter((t) => !(t.function.name in blocked)); // LOP-02
    if (offered.length) body.tools = offered;
    const reply = await complete(body, cfg);
    const u = reply.usage; // STR-11: the usage of the request that succeeded, only
    if (u) emit({ type: "usage", prompt_tokens: u.prompt_tokens ?? 0, completion_tokens: u.completion_tokens ?? 0 });
    if (reply.text) texts.push(reply.text.trim());
    for (const name in blocked) if (--blocked[name] < 0) delete blocked[name];
    const id = reply.id || `m${++shownSeq}`;
    step++;
    const toolMsgs = reply.calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.args } }));
    emit({ type: "message", id, role: "assistant", text: reply.text, reasoning: reply.reasoning || null, tool_calls: toolMsgs });
    const truncated = reply.finish === "length";
    if (truncated && !reply.calls.length && userLimit === null && maxTokens < ESCALATED_MAX_TOKENS) {
      maxTokens = ESCALATED_MAX_TOKENS; // TRN-07: raise the default limit first, same messages
      emit({ type: "removed", id });
      continue;
    }
    const assistant = { role: "assistant", content: reply.text || (reply.calls.length ? null : "(output cut off by the length limit)") };
    if (reply.reasoning) assistant.reasoning_content = reply.reasoning; // RSN-01/02
    if (toolMsgs.length) assistant.tool_calls = toolMsgs;
    messages.push(assistant);
    if (reply.calls.length) {
      recoveries = 0; // TRN-05
      const room = cfg.max_tool_calls ? cfg.max_tool_calls - toolCalls : Infinity;
      const notes = [];
      for (const [k, c] of reply.calls.entries()) {
        if (user.signal.aborted) throw new Aborted();
        if (k >= room) { // LOP-03: past the cap nothing more runs, and the turn ends
          messages.push({ role: "tool", tool_call_id: c.id, content: "Error: the tool-call cap of this turn is reached" });
          continue;
        }
        toolCalls++;
        const res = await runTool(start, c, truncated);
        emit({ type: "tool", call_id: c.id, name: c.name, ...res });
        dump("tool-calls.jsonl", { call_id: c.id, name: c.name, status: res.status, arguments: c.args }, true);
        messages.push({ role: "tool", tool_call_id: c.id, content: res.output });
        const note = loopReminder(calls, c, res.status === "error", blocked);
        if (note) notes.push(note);
      }
      if (reply.calls.length > room) {
        emit({ type: "message", id: `cap${step}`, role: "assistant", text: `Stopped: the limit of ${cfg.max_tool_calls} tool calls for this turn is reached.`, tool_calls: [] });
        return "completed";
      }
      const loop = loopNote(texts, calls, reply);
      for (const text of loop && !notes.length ? [loop] : notes) messages.push({ role: "user", content: text });
      if (truncated) continueAfterCut(messages, step); // TRN-03/06: tools first, uncounted
      continue;
    }
    if (!truncated) return "completed";
    const loop = loopNote(texts, calls, reply); // LOP-06: a note before the continuation
    if (loop) messages.push({ role: "user", content: loop });
    if (recoveries >= MAX_RECOVERIES) // TRN-04
      throw new ApiError("output_limit", `The output limit was repeatedly exceeded: ${MAX_RECOVERIES} continuations in a row were cut off again.`);
    if (user.signal.aborted) throw new Aborted(); // TRN-09
    recoveries++;
    continueAfterCut(messages, step);
  }
}

// TRN-01/02: the exact continuation text, sent as a user message, shown only as meta.
function continueAfterCut(messages, step) {
  messages.push({ role: "user", content: CONTINUATION_TEXT });
  emit({ type: "message", id: `c${step}`, role: "user", text: CONTINUATION_TEXT, meta: true });
}
