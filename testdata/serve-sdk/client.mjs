// A client of rpi serve built on the official ACP SDK 2.4's WebSocket
// transport (createWebSocketStream), run by TestServeACPSDKWebSocket:
// it opens a session and prompts over one connection, then, as the SDK's
// reconnect advice says, opens a second connection, initializes, loads
// the session (which the host still holds) and prompts again. It prints
// one JSON line of what it saw.
// Usage: node client.mjs SDK_DIR WS_URL TOKEN CWD
import path from "node:path";
import { pathToFileURL } from "node:url";

const [sdk, url, token, cwd] = process.argv.slice(2);
const acp = await import(pathToFileURL(path.join(sdk, "dist/v1/unstable/acp.js")).href);
const { createWebSocketStream } = await import(pathToFileURL(path.join(sdk, "dist/transports/ws-stream.js")).href);

const updates = [];
function connect() {
  const app = acp.client({ name: "rpi-serve-sdk-test" })
    .onNotification(acp.methods.client.session.update, ({ params }) => { updates.push(params); })
    .onRequest(acp.methods.client.session.requestPermission, () => ({ outcome: { outcome: "cancelled" } }));
  // A browser-style WebSocket sends no headers: the token goes in the URL.
  return app.connect(createWebSocketStream(`${url}?token=${encodeURIComponent(token)}`));
}
const chunks = (from) => updates.slice(from).filter((u) => u.update?.sessionUpdate?.endsWith("_chunk"))
  .map((u) => ({ kind: u.update.sessionUpdate, text: u.update.content?.text, seq: u._meta?.rpi?.seq ?? null }));

const out = {};
const first = connect();
const init = await first.agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
out.loadSession = init.agentCapabilities?.loadSession ?? false;
const session = await first.agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
out.sessionId = session.sessionId;
let from = updates.length;
const turn1 = await first.agent.request(acp.methods.agent.session.prompt, { sessionId: session.sessionId, prompt: [{ type: "text", text: "Hello" }] });
out.turn1 = { stopReason: turn1.stopReason, chunks: chunks(from) };
await first.close?.();

const second = connect();
await second.agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
from = updates.length;
await second.agent.request(acp.methods.agent.session.load, { sessionId: session.sessionId, cwd, mcpServers: [] });
out.loaded = chunks(from);
from = updates.length;
const turn2 = await second.agent.request(acp.methods.agent.session.prompt, { sessionId: session.sessionId, prompt: [{ type: "text", text: "Again" }] });
out.turn2 = { stopReason: turn2.stopReason, chunks: chunks(from) };
console.log(JSON.stringify(out));
process.exit(0);
