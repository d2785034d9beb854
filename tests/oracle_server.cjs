// Persistent reference oracle for the test suite (see tests/oracle.py).
//
// Usage: node tests/oracle_server.cjs ORACLE_DIR
// ORACLE_DIR holds the installed reference client (.cache/oracle). Reads one request per stdin
// line, {"verify": true|false, "case": {"name", "events", "messages"?, "state"?}}, and writes one
// result line per request, {"name", "messages", "state"} or {"name", "error"}, exactly what
// ../shared/oracle/apply.cjs prints for that case: the same stages in the same order
// (CompatibilityBoundary -> enforceEvents -> transformChunks -> verifyEvents (unless verify is
// false) -> defaultApplyEvents), the same environment variable and console.warn silenced.
"use strict";
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
const path = require("path");
const readline = require("readline");
const { createRequire } = require("module");

const oracleDir = path.resolve(process.argv[2] || ".");
const load = createRequire(path.join(oracleDir, "package.json"));
const { from, lastValueFrom } = load("rxjs");
const { toArray } = load("rxjs/operators");
const c = load("@ag-ui/client");
console.warn = () => {};
// stdout carries the protocol; anything the library prints goes to stderr instead.
const emit = process.stdout.write.bind(process.stdout);
console.log = console.info = console.debug = (...args) => process.stderr.write(args.join(" ") + "\n");

async function runCase(kase, verify) {
  const agent = { messages: kase.messages || [], state: kase.state || {} };
  const input = { threadId: "t", runId: "r", state: agent.state, messages: agent.messages,
                  tools: [], context: [], forwardedProps: {} };
  const source = { run: () => from(kase.events) };
  let events$ = new c.CompatibilityBoundary().run(input, source);
  events$ = c.enforceEvents()(events$);
  events$ = c.transformChunks()(events$);
  if (verify) events$ = c.verifyEvents()(events$);
  let messages = structuredClone(agent.messages), state = structuredClone(agent.state);
  const muts = await lastValueFrom(c.defaultApplyEvents(input, events$, agent, []).pipe(toArray()));
  for (const m of muts) { if (m.messages) messages = m.messages; if (m.state !== undefined) state = m.state; }
  return { messages, state };
}

(async () => {
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.trim()) continue;
    let name;
    let out;
    try {
      const request = JSON.parse(line);
      name = request.case.name;
      out = await runCase(request.case, request.verify !== false);
    } catch (e) {
      out = { error: String((e && e.message) || e) };
    }
    emit(JSON.stringify({ name, ...out }) + "\n");
  }
})();
