// A client of `b10x-harness mcp` written with the MCP TypeScript SDK, for
// interop/sdk_test.go: node sdk-client.mjs SDK_PREFIX CALLS_JSON stdio CMD ARGS...
// or ... http URL TOKEN. It lists the tools, makes the calls (a JSON array
// of {name, arguments}) one after another, and prints one JSON object:
// the protocol version negotiated, the tool names, and each result as the
// SDK returned it.
const [prefix, callsJSON, mode, ...rest] = process.argv.slice(2);
const base = `${prefix}/node_modules/@modelcontextprotocol/sdk/dist/esm/`;
const { Client } = await import(base + 'client/index.js');

let transport;
if (mode === 'stdio') {
  const { StdioClientTransport } = await import(base + 'client/stdio.js');
  transport = new StdioClientTransport({ command: rest[0], args: rest.slice(1), stderr: 'inherit' });
} else if (mode === 'http') {
  const { StreamableHTTPClientTransport } = await import(base + 'client/streamableHttp.js');
  transport = new StreamableHTTPClientTransport(new URL(rest[0]), {
    requestInit: { headers: { Authorization: `Bearer ${rest[1]}` } },
  });
} else {
  throw new Error(`unknown mode ${mode}`);
}
let protocolVersion = null;
const set = transport.setProtocolVersion?.bind(transport);
transport.setProtocolVersion = (v) => {
  protocolVersion = v;
  set?.(v);
};

const client = new Client({ name: 'b10x-interop-sdk', version: '1' }, { capabilities: {} });
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
const results = [];
for (const c of JSON.parse(callsJSON)) {
  results.push(await client.callTool({ name: c.name, arguments: c.arguments }));
}
await client.close();
console.log(JSON.stringify({ protocolVersion, tools, results }));
