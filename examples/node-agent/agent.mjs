// A minimal agent speaking the adapter protocol, version 1. No npm dependencies (global fetch).
// Usage: --agent cmd:"node agent.mjs"   (set STREAM=0 in the environment for non-streaming)
import readline from "node:readline";

const emit = (ev) => process.stdout.write(JSON.stringify(ev) + "\n");
const BASE = process.env.OPENAI_BASE_URL;
const KEY = process.env.OPENAI_API_KEY;
const STREAM = process.env.STREAM !== "0";
let aborted = false;
const controller = new AbortController();

emit({ type: "hello", agent: "node-example", version: "1.0.0", capabilities: ["tools", "abort"] });

const rl = readline.createInterface({ input: process.stdin });
let started = false;
rl.on("line", (line) => {
  const msg = JSON.parse(line);
  if (msg.type === "start" && !started) {
    started = true;
    runTurn(msg).then(
      (reason) => emit({ type: "turn_end", reason }),
      (err) => {
        if (aborted) return emit({ type: "turn_end", reason: "aborted" });
        emit({ type: "error", kind: "agent", message: String(err && err.message) });
        emit({ type: "turn_end", reason: "error" });
      },
    );
  } else if (msg.type === "abort") {
    aborted = true;
    controller.abort();
  }
});
rl.on("close", () => process.exit(0));

async function chat(body) {
  const r = await fetch(`${BASE}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ ...body, stream: STREAM }),
    signal: controller.signal,
  });
  if (!r.ok) throw new Error(`HTTP ${r.status}: ${(await r.text()).slice(0, 200)}`);
  if (!STREAM) {
    const m = (await r.json()).choices[0].message;
    return { text: m.content || "", calls: (m.tool_calls || []).map((c) => ({ id: c.id, name: c.function.name, args: c.function.arguments })) };
  }
  let text = "", buf = "";
  const calls = [];
  const decoder = new TextDecoder();
  for await (const chunk of r.body) {
    buf += decoder.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (!line.startsWith("data:")) continue;
      const data = line.slice(5).trim();
      if (data === "[DONE]") continue;
      const ev = JSON.parse(data);
      if (ev.error) throw new Error(ev.error.message || "stream error");
      for (const ch of ev.choices || []) {
        text += ch.delta?.content || "";
        for (const tc of ch.delta?.tool_calls || []) {
          const c = (calls[tc.index] ||= { id: "", name: "", args: "" });
          c.id = tc.id || c.id;
          c.name += tc.function?.name || "";
          c.args += tc.function?.arguments || "";
        }
      }
    }
  }
  return { text, calls: calls.filter(Boolean) };
}

async function runTool(start, call) {
  try {
    const r = await fetch(`${start.tool_endpoint}/${call.name}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ call_id: call.id, arguments: JSON.parse(call.args || "{}") }),
      signal: AbortSignal.any([controller.signal, AbortSignal.timeout(30000 * (start.time_scale || 1))]),
    });
    const body = await r.json();
    if (body.error) return { status: "error", output: `Error: ${body.error.message || body.error.type}` };
    return { status: "ok", output: String(body.output ?? "") };
  } catch (e) {
    if (aborted) throw e;
    return { status: "error", output: `Error: ${e.message}` };
  }
}

async function runTurn(start) {
  const tools = (start.tools || []).map((t) => ({ type: "function", function: t }));
  const messages = [...(start.history || []), { role: "user", content: start.prompt }];
  for (let step = 0; step < 20; step++) {
    const body = { model: start.model, messages };
    if (tools.length) body.tools = tools;
    const { text, calls } = await chat(body);
    const toolCalls = calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.args } }));
    emit({ type: "message", id: `a${step}`, role: "assistant", text, tool_calls: toolCalls });
    messages.push({ role: "assistant", content: text || null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) });
    if (!calls.length) return "completed";
    for (const c of calls) {
      const res = await runTool(start, c);
      emit({ type: "tool", call_id: c.id, name: c.name, ...res });
      messages.push({ role: "tool", tool_call_id: c.id, content: res.output });
    }
  }
  emit({ type: "error", kind: "loop", message: "Turn step limit reached." });
  return "error";
}
