// Reference for the partial tool-call arguments (see tests/test_partial_json.py).
//
// Usage: node tests/partial_args_ref.cjs ORACLE_DIR   (cases on standard input, one a line)
// A case is {"deltas": [...]}: the arguments of one tool call, streamed in those deltas, go
// through the reference pipeline (enforceEvents -> transformChunks -> verifyEvents ->
// defaultApplyEvents) with one subscriber recording, per TOOL_CALL_ARGS, what the reference hands
// to onToolCallArgsEvent (partialToolCallArgs, and toolCallBuffer: the arguments before that
// delta) and, at TOOL_CALL_END, toolCallArgs. partialToolCallArgs is also given parsed by
// JSON.parse (null when it does not parse). One result line per case, in order.
"use strict";
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
const path = require("path");
const readline = require("readline");
const { createRequire } = require("module");

const load = createRequire(path.join(path.resolve(process.argv[2]), "package.json"));
const { from, lastValueFrom } = load("rxjs");
const { toArray } = load("rxjs/operators");
const c = load("@ag-ui/client");
console.warn = () => {};
console.log = console.info = console.debug = (...a) => process.stderr.write(a.join(" ") + "\n");

function parsed(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

async function runCase(kase) {
  const input = { threadId: "t", runId: "r", state: {}, messages: [], tools: [], context: [],
                  forwardedProps: {} };
  const events = [
    { type: "RUN_STARTED", threadId: "t", runId: "r" },
    { type: "TOOL_CALL_START", toolCallId: "c", toolCallName: "f" },
    ...kase.deltas.map((delta) => ({ type: "TOOL_CALL_ARGS", toolCallId: "c", delta })),
    { type: "TOOL_CALL_END", toolCallId: "c" },
    { type: "RUN_FINISHED", threadId: "t", runId: "r" },
  ];
  const events$ = c.verifyEvents()(c.transformChunks()(c.enforceEvents()(from(events))));
  const partial = [];
  let end;
  const subscriber = {
    onToolCallArgsEvent: (p) => {
      const text = p.partialToolCallArgs;
      partial.push({ buffer: p.toolCallBuffer, text, value: typeof text === "string" ? parsed(text) : text });
    },
    onToolCallEndEvent: (p) => { end = p.toolCallArgs; },
  };
  await lastValueFrom(c.defaultApplyEvents(input, events$, { messages: [], state: {} },
                                           [subscriber]).pipe(toArray()));
  return { partial, end };
}

(async () => {
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.trim()) continue;
    let out;
    try {
      out = await runCase(JSON.parse(line));
    } catch (e) {
      out = { error: String(e && e.message || e) };
    }
    process.stdout.write(JSON.stringify(out) + "\n");
  }
})();
