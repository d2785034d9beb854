// Reference for a run that fails part way (see tests/test_redis_dispatch.py): the official
// HttpAgent (1.0.0) runs one run and prints what it holds afterwards, also when the run failed.
//
// Usage: node tests/http_agent_failed_ref.cjs ORACLE_DIR URL   (a spec on standard input)
// The spec: {"threadId", "messages", "runId", "forwardedProps"}. One line:
// {"messages", "state", "runError", "error"}: "runError" the RUN_ERROR event its subscriber got
// (or null), "error" what runAgent threw (or null).
"use strict";
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
const path = require("path");
const { createRequire } = require("module");

const load = createRequire(path.join(path.resolve(process.argv[2]), "package.json"));
const c = load("@ag-ui/client");
console.warn = () => {};
console.log = console.info = console.debug = (...a) => process.stderr.write(a.join(" ") + "\n");

const url = process.argv[3];
const spec = JSON.parse(require("fs").readFileSync(0, "utf8"));
const agent = new c.HttpAgent({ url, threadId: spec.threadId, initialMessages: spec.messages || [],
  initialState: {} });
(async () => {
  let error = null;
  let runError = null;
  const subscriber = { onRunErrorEvent: ({ event }) => { runError = event; } };
  try {
    await agent.runAgent({ runId: spec.runId, forwardedProps: spec.forwardedProps || {} },
      subscriber);
  } catch (e) {
    error = String((e && e.message) || e);
  }
  process.stdout.write(JSON.stringify({ messages: agent.messages, state: agent.state, runError, error }) + "\n");
})();
