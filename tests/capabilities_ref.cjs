// Reference for AgentCapabilities (see tests/test_client_tools.py): the official schema's verdict.
//
// Usage: node tests/capabilities_ref.cjs ORACLE_DIR   (JSON values on standard input, one a line)
// For each value, one line: {"ok": <AgentCapabilitiesSchema.parse(value)>} or {"error": "..."}.
"use strict";
const path = require("path");
const readline = require("readline");
const { createRequire } = require("module");

const load = createRequire(path.join(path.resolve(process.argv[2]), "package.json"));
const { AgentCapabilitiesSchema } = load("@ag-ui/core/schemas");

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (!line.trim()) return;
  let out;
  try {
    out = { ok: AgentCapabilitiesSchema.parse(JSON.parse(line)) };
  } catch (e) {
    out = { error: String((e && e.message) || e) };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
});
