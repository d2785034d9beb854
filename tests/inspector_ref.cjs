// The official schemas on an agui-inspector session file (see tests/test_inspector.py).
//
// Usage: node tests/inspector_ref.cjs ORACLE_DIR SESSION.json
// ORACLE_DIR holds the installed reference packages (.cache/oracle). Prints one JSON object:
// for each run, whether its input is a RunAgentInput (RunAgentInputSchema of @ag-ui/core 1.0.0)
// and whether each interrupt of its outcome is an Interrupt; for each frame whose schemaVerdict
// is "valid", whether its parsed value is an event (EventSchemas), with the first issue if not.
"use strict";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const load = createRequire(path.join(path.resolve(process.argv[2]), "package.json"));
const schemas = load("@ag-ui/core/schemas");
const file = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
const session = file.session;
const out = { inputs: [], interrupts: [], frames: {} };
for (const run of session.runs) {
  out.inputs.push(schemas.RunAgentInputSchema.safeParse(run.input).success);
  for (const entry of run.outcome.interrupts || []) {
    out.interrupts.push(schemas.InterruptSchema.safeParse(entry).success);
  }
}
for (const frame of session.frames) {
  if (frame.schemaVerdict !== "valid") continue;
  const checked = schemas.EventSchemas.safeParse(frame.parsed);
  out.frames[frame.id] = checked.success ? true : String(checked.error.issues[0].message);
}
process.stdout.write(JSON.stringify(out) + "\n");
