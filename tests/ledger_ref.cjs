// Reference for the run ledger tests (see tests/test_ledger.py).
//
// Usage: node tests/ledger_ref.cjs ORACLE_DIR CASES.jsonl
// ORACLE_DIR holds the installed reference client (.cache/oracle, see tests/oracle.py). A case is
// {"name", "events"} or {"name", "aggregate": [TokenUsage...]}. For an events case, the events go
// through the reference pipeline (CompatibilityBoundary -> enforceEvents -> transformChunks ->
// verifyEvents -> defaultApplyEvents) with one subscriber recording, per RUN_FINISHED, what the
// reference hands to onRunFinishedEvent (outcome, result, pendingToolCallIds, interrupts) and,
// per RUN_FINISHED / RUN_ERROR, aggregateTokenUsage of the event's usage; agent.pendingInterrupts
// is reported at the end. An aggregate case prints aggregateTokenUsage of its list.
"use strict";
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = "true";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const load = createRequire(path.join(path.resolve(process.argv[2]), "package.json"));
const { from, lastValueFrom } = load("rxjs");
const { toArray } = load("rxjs/operators");
const c = load("@ag-ui/client");
const core = load("@ag-ui/core");
console.warn = () => {};
console.log = console.info = console.debug = (...a) => process.stderr.write(a.join(" ") + "\n");

const aggregate = (usage) => (usage === undefined ? undefined : core.aggregateTokenUsage(usage));

async function runCase(kase) {
  const agent = { messages: [], state: {} };
  const input = { threadId: "t", runId: "r", state: {}, messages: [], tools: [], context: [],
                  forwardedProps: {} };
  let events$ = new c.CompatibilityBoundary().run(input, { run: () => from(kase.events) });
  events$ = c.verifyEvents()(c.transformChunks()(c.enforceEvents()(events$)));
  const ended = [];
  const subscriber = {
    onRunFinishedEvent: (p) => {
      const run = { outcome: p.outcome };
      if (p.result !== undefined) run.result = p.result;
      if (p.pendingToolCallIds !== undefined) run.pendingToolCallIds = p.pendingToolCallIds;
      if (p.interrupts !== undefined) run.interrupts = p.interrupts;
      if (p.event.usage !== undefined) run.usage = aggregate(p.event.usage);
      ended.push(run);
    },
    onRunErrorEvent: (p) => {
      const run = { error: p.event.message };
      if (p.event.usage !== undefined) run.usage = aggregate(p.event.usage);
      ended.push(run);
    },
  };
  await lastValueFrom(c.defaultApplyEvents(input, events$, agent, [subscriber]).pipe(toArray()));
  return { ended, pendingInterrupts: agent.pendingInterrupts };
}

(async () => {
  const lines = fs.readFileSync(process.argv[3], "utf8").split("\n").filter(Boolean);
  for (const line of lines) {
    const kase = JSON.parse(line);
    let out;
    if (kase.aggregate !== undefined) out = { aggregate: aggregate(kase.aggregate) };
    else {
      try { out = await runCase(kase); } catch (e) { out = { error: String((e && e.message) || e) }; }
    }
    process.stdout.write(JSON.stringify({ name: kase.name, ...out }) + "\n");
  }
})();
