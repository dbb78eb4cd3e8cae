// `search` tool calls to `ctxrag mcp`, one at a time, each a new query, with the MCP TypeScript SDK's client (which
// checks each answer against the tool's output schema with a compiled validator). Run by benchmarks/services_ab.py:
// node mcp_node_client.mjs QUESTIONS.jsonl COUNT WARM_QUERY COMMAND ARGS... -> one JSON line, each call's ms.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [questionsFile, count, warmQuery, command, ...args] = process.argv.slice(2);
const queries = readFileSync(questionsFile, "utf8").split("\n").filter((line) => line.trim()).map((line) => JSON.parse(line).query).slice(0, Number(count));
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "ctxrag-benchmark", version: "1.0.0" });
await client.connect(transport);
await client.listTools();
await client.callTool({ name: "search", arguments: { query: warmQuery, k: 10 } });
const times = [];
let errors = 0;
for (const query of queries) {
  const begun = performance.now();
  const result = await client.callTool({ name: "search", arguments: { query, k: 10 } });
  times.push(performance.now() - begun);
  if (result.isError || result.structuredContent?.hits?.length !== 10) errors += 1;
}
await client.close();
console.log(JSON.stringify({ times, errors }));
