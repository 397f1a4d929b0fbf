// Agent transcripts in the sample browser (report_transcripts.py): each agent sample's loop
// turn by turn, its badges, and the "agent loops" filter. Every text a model or a tool wrote
// goes in as textContent, never as markup.
"use strict";
const TRANSCRIPT_TURNS_SHOWN = 100;
const TRANSCRIPT_TEXT_SHOWN = 100000;

const transcriptStyle = document.createElement("style");
transcriptStyle.textContent = `
  .transcript { margin: 8px 0; }
  .transcript .t-head { font-size: 12px; color: var(--muted); margin-bottom: 4px; }
  .transcript .t-turn { border-left: 3px solid var(--line); padding-left: 8px; margin: 6px 0; }
  .transcript .t-assistant { border-left-color: var(--accent); }
  .transcript .t-tool { border-left-color: var(--good); }
  .transcript .t-tool.t-error { border-left-color: var(--bad); background: #fdf1ef; }
  .transcript .t-role { font-size: 12px; color: var(--muted); }
  .transcript .t-call { margin: 4px 0 4px 10px; }
  .transcript .t-name { font-family: monospace; font-weight: 600; }
`;
document.head.append(transcriptStyle);

function tnode(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else if (k === "text") node.textContent = v; else node.setAttribute(k, v);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}
const tnum = (v, digits) => (typeof v === "number" && Number.isFinite(v)) ? (Number.isInteger(v) ? String(v) : v.toFixed(digits)) : "–";
function ttext(value) {
  // A text as a <pre>; a very long one is cut here (the samples file has it whole).
  let text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  if (text === undefined) text = String(value);
  if (text.length > TRANSCRIPT_TEXT_SHOWN) text = text.slice(0, TRANSCRIPT_TEXT_SHOWN) + "\n[... " + (text.length - TRANSCRIPT_TEXT_SHOWN) + " more characters in the samples file]";
  return tnode("pre", { text });
}
function transcriptCall(call) {
  const parsed = call.arguments !== null && call.arguments !== undefined;
  return tnode("div", { class: "t-call" + (parsed ? "" : " t-unparsed") },
    tnode("span", { class: "t-name", text: String(call.name || "(no name)") }),
    tnode("span", { class: "muted", text: " " + String(call.id || "") }),
    parsed ? null : tnode("span", { class: "badge no", text: " arguments did not parse" }),
    ttext(parsed ? call.arguments : call.raw));
}
function transcriptTurn(turn, index) {
  const role = String(turn.role);
  if (role === "prompt") {
    const messages = Array.isArray(turn.messages) ? turn.messages : [{ role: "user", content: turn.messages }];
    return tnode("div", { class: "t-turn t-prompt", "data-turn": String(index) },
      ...messages.map((m) => tnode("div", {}, tnode("div", { class: "t-role", text: String(m && m.role) }), ttext(m && m.content),
        ...((m && Array.isArray(m.tool_calls)) ? m.tool_calls.map(transcriptCall) : []))));
  }
  if (role === "assistant") {
    const facts = ["assistant", "finish " + (turn.finish_reason || "–"), tnum(turn.answer_tokens, 0) + " tokens"];
    if (typeof turn.reasoning_tokens === "number") facts.push(turn.reasoning_tokens + " thinking tokens");
    facts.push(tnum(turn.seconds, 3) + " s");
    const calls = Array.isArray(turn.tool_calls) ? turn.tool_calls : [];
    return tnode("div", { class: "t-turn t-assistant", "data-turn": String(index) },
      tnode("div", { class: "t-role", text: facts.join(" · ") }),
      typeof turn.reasoning === "string" ? tnode("details", {}, tnode("summary", { class: "muted", text: "thinking" }), ttext(turn.reasoning)) : null,
      turn.content ? ttext(turn.content) : null, ...calls.map(transcriptCall));
  }
  if (role === "tool") {
    const facts = ["tool " + String(turn.name), String(turn.tool_call_id || ""), turn.error ? "error" : "ok", tnum(turn.seconds, 3) + " s"];
    return tnode("div", { class: "t-turn t-tool" + (turn.error ? " t-error" : ""), "data-turn": String(index) },
      tnode("div", { class: "t-role", text: facts.join(" · ") }), ttext(turn.content));
  }
  return tnode("div", { class: "t-turn", "data-turn": String(index) }, tnode("div", { class: "t-role", text: role }), ttext(turn));
}
// A run's transcript of one sample: a head line, then the turns a hundred at a time.
function renderTranscript(view) {
  const t = view && view.transcript;
  if (!t || typeof t !== "object") return null;
  const turns = Array.isArray(t.turns) ? t.turns : [];
  const head = "stopped by " + String(t.stopped_by) + " · " + tnum(t.model_turns, 0) + " model turns · " + tnum(t.tool_calls, 0) +
    " tool calls (" + tnum(t.tool_errors, 0) + " failed) · " + tnum(t.tokens, 0) + " tokens · " + tnum(t.seconds, 3) + " s";
  const box = tnode("div", { class: "transcript", "data-stopped": String(t.stopped_by) }, tnode("h4", { text: "Transcript" }), tnode("div", { class: "t-head", text: head }));
  let shown = 0;
  const more = tnode("button", { class: "t-more" });
  const showMore = () => {
    const next = turns.slice(shown, shown + TRANSCRIPT_TURNS_SHOWN);
    more.before(...next.map((turn, i) => transcriptTurn(turn && typeof turn === "object" ? turn : { role: "?", content: turn }, shown + i)));
    shown += next.length;
    if (shown >= turns.length) more.remove(); else more.textContent = "show " + Math.min(TRANSCRIPT_TURNS_SHOWN, turns.length - shown) + " more turns (" + (turns.length - shown) + " left)";
  };
  more.addEventListener("click", showMore);
  box.append(more);
  showMore();
  if (t.end_state && typeof t.end_state === "object" && Object.keys(t.end_state).length) box.append(tnode("div", { class: "t-role", text: "end state" }), ttext(t.end_state));
  return box;
}
// Badges of a sample's summary line: per run, failed calls and the limit that ended the loop.
function transcriptBadges(sample, labels) {
  const out = [];
  sample.runs.forEach((view, i) => {
    const a = view && view.agent;
    if (!a) return;
    if (a.failed_calls) out.push(tnode("span", { class: "badge no", text: labels[i] + ": " + a.failed_calls + " failed call" + (a.failed_calls > 1 ? "s" : "") }));
    if (a.hit_limit) out.push(tnode("span", { class: "badge no", text: labels[i] + ": hit " + a.hit_limit }));
  });
  return out;
}
// The "agent loops" filter: some run's loop had a failed call, hit a limit, or ended with a
// final answer a metric scored 0.
function agentMatch(sample, how) {
  return sample.runs.some((view) => {
    const a = view && view.agent;
    if (!a) return false;
    if (how === "failed") return a.failed_calls > 0;
    if (how === "limit") return a.hit_limit !== null && a.hit_limit !== undefined;
    if (how === "wrong") return a.wrong_answer === true;
    return true;
  });
}
