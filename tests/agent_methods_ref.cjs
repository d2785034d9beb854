// Reference for HttpAgent's addMessages, setMessages and clone (see tests/test_client_tools.py).
//
// Usage: node tests/agent_methods_ref.cjs ORACLE_DIR URL   (a spec on standard input)
// The spec: {"threadId", "messages", "state", "steps": [[op, agent, arg?], ...]} with op one of
// "add" (addMessages(arg)), "set" (setMessages(arg)), "clone" (agents[arg] = agents[agent]
// .clone()), "run" (runAgent({runId: arg})). Agent 0 is the HttpAgent made from the spec.
// After each step one line: {"step", "agents": [{"threadId", "messages", "state"}, ...]}.
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
const agents = [
  new c.HttpAgent({ url, threadId: spec.threadId, initialMessages: spec.messages || [],
    initialState: spec.state || {} }),
];
(async () => {
  for (const [n, [op, who, arg]] of spec.steps.entries()) {
    const agent = agents[who];
    if (op === "add") agent.addMessages(JSON.parse(JSON.stringify(arg)));
    else if (op === "set") agent.setMessages(arg);
    else if (op === "clone") agents[arg] = agent.clone();
    else if (op === "run") await agent.runAgent({ runId: arg });
    else throw new Error(`unknown step ${op}`);
    const view = agents.map((a) => ({ threadId: a.threadId, messages: a.messages, state: a.state }));
    process.stdout.write(JSON.stringify({ step: n, agents: view }) + "\n");
  }
})().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + "\n");
  process.exit(1);
});
