// Long run calls through the MCP TypeScript SDK, for interop/long_test.go:
// SDK_LONG_PLAN=PLAN node sdk-long.mjs SDK_PREFIX stdio CMD ARGS..., or
// ... http URL TOKEN, where PLAN is {"first": ARGV, "second": ARGV, "read":
// PATH} (in the environment, so that no argv but the calls' holds it). It
// prints one JSON object a line for the test, and reads the test's
// commands from stdin, one a line:
//
//  1. calls run with argv first, with an onprogress handler (the SDK then
//     sends a progress token), and prints {"event":"first"} with every
//     progress notification (ms after the call began) and the result;
//  2. calls run with argv second, with an AbortSignal and onprogress,
//     prints {"event":"progress"} at its first progress notification and
//     waits for the line "abort"; then aborts (the SDK sends
//     notifications/cancelled) and prints {"event":"aborted"} with how
//     long the call's promise took to settle after abort() and what it
//     settled to;
//  3. waits for the line "go on", reads PATH (the session goes on after
//     the cancellation), closes the client and prints {"event":"end"}.
import readline from 'node:readline';

const [prefix, mode, ...rest] = process.argv.slice(2);
const plan = JSON.parse(process.env.SDK_LONG_PLAN);
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

const emit = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const expect = async (want) => {
  const { value, done } = await lines.next();
  if (done || value !== want) throw new Error(`the test said ${JSON.stringify(value)}, not ${JSON.stringify(want)}`);
};
const now = () => performance.now();

const client = new Client({ name: 'b10x-interop-sdk-long', version: '1' }, { capabilities: {} });
await client.connect(transport);

// 1. progress while the call runs.
let t0 = now();
const progress = [];
const first = await client.callTool({ name: 'run', arguments: { argv: plan.first } }, undefined, {
  onprogress: (p) => progress.push({ ms: Math.round(now() - t0), progress: p.progress, message: p.message }),
});
emit({ event: 'first', ms: Math.round(now() - t0), progress, result: first });

// 2. cancelled after its first progress.
const ac = new AbortController();
t0 = now();
let seen = false;
let abortedAt = 0;
const settled = client
  .callTool({ name: 'run', arguments: { argv: plan.second } }, undefined, {
    signal: ac.signal,
    onprogress: (p) => {
      if (!seen) {
        seen = true;
        emit({ event: 'progress', ms: Math.round(now() - t0), progress: p.progress, message: p.message });
      }
    },
  })
  .then(
    (result) => ({ result, ms: Math.round(now() - abortedAt) }),
    (e) => ({ error: String(e), code: e?.code ?? null, ms: Math.round(now() - abortedAt) }),
  );
await expect('abort');
abortedAt = now();
ac.abort('cancelled by the interop test');
emit({ event: 'aborted', ...(await settled) });

// 3. the session goes on.
await expect('go on');
const read = await client.callTool({ name: 'file_read', arguments: { path: plan.read } });
await client.close();
emit({ event: 'end', read });
