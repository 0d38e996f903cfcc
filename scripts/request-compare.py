# Drives pi 1.6 and rpi through one conversation per API against a local
# capture server, then prints, request by request, where the HTTP requests
# they sent differ (body fields and headers). Run by scripts/request-compare.sh,
# which sets up the agent dirs; usage:
#   python3 request-compare.py WORK PI_CMD_JSON RPI_CMD_JSON
# The conversation, per model: set_model, set_thinking_level high, a prompt
# the server answers with thinking and a `read` tool call, then text; a
# second prompt; a prompt with an image. Long strings (the system prompt,
# tool descriptions) show as their length and a hash.
import base64, hashlib, json, os, re, subprocess, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

work, pi_cmd, rpi_cmd = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
only = sys.argv[4].split(",") if len(sys.argv) > 4 and sys.argv[4] else None
captured = []   # (label, path, headers, body)
label = ["?"]
lock = threading.Lock()

def sse(h, events, named):
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.send_header("Cache-Control", "no-cache")
    h.send_header("Connection", "close")
    h.end_headers()
    for ev in events:
        if named:
            h.wfile.write(("event: %s\n" % ev["type"]).encode())
        h.wfile.write(("data: %s\n\n" % json.dumps(ev)).encode())
    if not named and "GenerateContent" not in h.path:
        h.wfile.write(b"data: [DONE]\n\n")
    h.wfile.flush()

ARGS = json.dumps({"path": "hello.txt"})

def chat(h, body):
    last = body["messages"][-1]
    want_tool = last.get("role") == "user" and "READ_FILE" in json.dumps(last)
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": body.get("model")}
    ch = lambda delta, fin=None: dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": fin}])
    evs = [ch({"role": "assistant", "content": ""})]
    if want_tool:
        evs += [ch({"reasoning_content": "I should read it."}),
                ch({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "read", "arguments": ARGS}}]}),
                ch({}, "tool_calls")]
    else:
        evs += [ch({"content": "Done."}), ch({}, "stop")]
    evs.append(dict(base, choices=[], usage={"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}))
    sse(h, evs, False)

def anthropic(h, body):
    last = body["messages"][-1]
    want_tool = last["role"] == "user" and "READ_FILE" in json.dumps(last) and "tool_result" not in json.dumps(last)
    evs = [{"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": body.get("model"),
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}}}]
    if want_tool:
        evs += [{"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "I should read it."}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "SIG"}},
                {"type": "content_block_stop", "index": 0},
                {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}},
                {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ARGS}},
                {"type": "content_block_stop", "index": 1},
                {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 10}}]
    else:
        evs += [{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done."}},
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 10}}]
    evs.append({"type": "message_stop"})
    sse(h, evs, True)

def responses(h, body):
    last = body["input"][-1]
    want_tool = last.get("role") == "user" and "READ_FILE" in json.dumps(last)
    resp = {"id": "resp_1", "object": "response", "created_at": 1, "status": "in_progress", "model": body.get("model"), "output": []}
    evs = [{"type": "response.created", "sequence_number": 0, "response": resp}]
    out = []
    if want_tool:
        rs = {"type": "reasoning", "id": "rs_1", "summary": []}
        evs += [{"type": "response.output_item.added", "output_index": 0, "item": rs},
                {"type": "response.reasoning_summary_part.added", "item_id": "rs_1", "output_index": 0, "summary_index": 0, "part": {"type": "summary_text", "text": ""}},
                {"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0, "summary_index": 0, "delta": "I should read it."},
                {"type": "response.reasoning_summary_text.done", "item_id": "rs_1", "output_index": 0, "summary_index": 0, "text": "I should read it."},
                {"type": "response.reasoning_summary_part.done", "item_id": "rs_1", "output_index": 0, "summary_index": 0, "part": {"type": "summary_text", "text": "I should read it."}}]
        rsd = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "I should read it."}], "encrypted_content": "ENC"}
        evs.append({"type": "response.output_item.done", "output_index": 0, "item": rsd})
        fc = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read", "arguments": "", "status": "in_progress"}
        evs += [{"type": "response.output_item.added", "output_index": 1, "item": fc},
                {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 1, "delta": ARGS},
                {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 1, "arguments": ARGS}]
        fcd = dict(fc, arguments=ARGS, status="completed")
        evs.append({"type": "response.output_item.done", "output_index": 1, "item": fcd})
        out = [rsd, fcd]
    else:
        msg = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}
        part = {"type": "output_text", "text": "", "annotations": []}
        evs += [{"type": "response.output_item.added", "output_index": 0, "item": msg},
                {"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0, "part": part},
                {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "Done."},
                {"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0, "content_index": 0, "text": "Done."},
                {"type": "response.content_part.done", "item_id": "msg_1", "output_index": 0, "content_index": 0, "part": dict(part, text="Done.")}]
        msgd = dict(msg, status="completed", content=[dict(part, text="Done.")])
        evs.append({"type": "response.output_item.done", "output_index": 0, "item": msgd})
        out = [msgd]
    done = dict(resp, status="completed", output=out, usage={"input_tokens": 100, "output_tokens": 10, "total_tokens": 110,
                "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}})
    evs.append({"type": "response.completed", "response": done})
    for i, e in enumerate(evs):
        e["sequence_number"] = i
    sse(h, evs, True)

def gemini(h, body):
    last = body["contents"][-1]
    want_tool = last["role"] == "user" and "READ_FILE" in json.dumps(last) and "functionResponse" not in json.dumps(last)
    usage = {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110}
    if want_tool:
        parts = [{"text": "I should read it.", "thought": True, "thoughtSignature": "U0lH"},
                 {"functionCall": {"name": "read", "args": {"path": "hello.txt"}}, "thoughtSignature": "U0lHMg=="}]
    else:
        parts = [{"text": "Done."}]
    sse(h, [{"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}], "usageMetadata": usage, "modelVersion": "x"}], False)

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        body = json.loads(raw or b"{}")
        with lock:
            captured.append((label[0], self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        path = self.path.split("?")[0]
        if path.endswith("/chat/completions"): chat(self, body)
        elif path.endswith("/v1/messages"): anthropic(self, body)
        elif path.endswith("/responses"): responses(self, body)
        elif "GenerateContent" in path: gemini(self, body)
        else:
            self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers()
    do_GET = do_POST

srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
port = srv.server_address[1]
threading.Thread(target=srv.serve_forever, daemon=True).start()

# A 4x4 red PNG.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR4nGP4z8AARwzEcQCukw/x0F8jngAAAABJRU5ErkJggg=="

MODELS = [  # (provider, model id, api)
    ("capture", "cap-reasoner", "openai-completions"),
    ("deepseek", "deepseek-v4-pro", "openai-completions"),
    ("openrouter", "openai/gpt-5.5", "openai-completions"),
    ("fireworks", "accounts/fireworks/models/kimi-k3", "openai-completions"),
    ("anthropic", "claude-sonnet-4-5", "anthropic-messages"),
    ("openai", "gpt-5.1", "openai-responses"),
    ("google", "gemini-2.5-flash", "google-generative-ai"),
    ("google", "gemini-3-flash-preview", "google-generative-ai"),
]

def agent_dir(target):
    d = os.path.join(work, "run-" + target)
    for sub in ("agent", "home", "cwd"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    base = "http://127.0.0.1:%d" % port
    models = {"providers": {
        "capture": {"baseUrl": base + "/v1", "api": "openai-completions", "apiKey": "capture-key", "models": [
            {"id": "cap-reasoner", "name": "Capture Reasoner", "reasoning": True, "input": ["text", "image"], "contextWindow": 128000, "maxTokens": 16384,
             "cost": {"input": 1, "output": 2, "cacheRead": 0.1, "cacheWrite": 1.25}}]},
        "anthropic": {"baseUrl": base},
        "openai": {"baseUrl": base + "/v1"},
        "google": {"baseUrl": base + "/v1beta"},
        "deepseek": {"baseUrl": base + "/deepseek"},
        "openrouter": {"baseUrl": base + "/openrouter/api/v1"},
        "fireworks": {"baseUrl": base + "/fireworks/inference/v1"},
    }}
    with open(os.path.join(d, "agent", "models.json"), "w") as f: json.dump(models, f)
    with open(os.path.join(d, "agent", "settings.json"), "w") as f: json.dump({"retry": {"maxRetries": 0}}, f)
    with open(os.path.join(d, "cwd", "hello.txt"), "w") as f: f.write("hello from the test file\n")
    return d

def run(target, cmd, provider, model):
    d = agent_dir(target)
    env = dict(os.environ, HOME=os.path.join(d, "home"), PI_CODING_AGENT_DIR=os.path.join(d, "agent"), PI_OFFLINE="1", PI_TELEMETRY="0")
    for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY", "OPENROUTER_API_KEY", "FIREWORKS_API_KEY"):
        env[k] = "test-" + k.split("_")[0].lower()
    p = subprocess.Popen(cmd + ["--mode", "rpc", "--no-session"], cwd=os.path.join(d, "cwd"), env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(os.path.join(d, "stderr.log"), "ab"), text=True, bufsize=1)
    lines = []
    log = open(os.path.join(d, "stdout-%s-%s.jsonl" % (provider, model.replace("/", "_"))), "w")
    def reader():
        for line in p.stdout:
            lines.append(line); log.write(line)
        log.close()
    threading.Thread(target=reader, daemon=True).start()
    def wait_for(pred, what):
        deadline = time.time() + 60
        i = 0
        while time.time() < deadline:
            while i < len(lines):
                try: m = json.loads(lines[i])
                except ValueError: m = {}
                i += 1
                if pred(m): return m
            time.sleep(0.02)
        raise SystemExit("%s %s/%s: no %s; stdout tail: %s" % (target, provider, model, what, "".join(lines[-5:])))
    seq = [0]
    def send(c, until=None):
        seq[0] += 1
        c["id"] = "c%d" % seq[0]
        start = len(lines)
        p.stdin.write(json.dumps(c) + "\n"); p.stdin.flush()
        r = wait_for(lambda m: m.get("type") == "response" and m.get("id") == c["id"], "response to " + c["type"])
        if not r.get("success"): raise SystemExit("%s: %s failed: %s" % (target, c["type"], r.get("error")))
        if until:
            del lines[:start]
            wait_for(lambda m: m.get("type") == until, until)
    label[0] = "%s %s/%s" % (target, provider, model)
    send({"type": "set_model", "provider": provider, "modelId": model})
    send({"type": "set_thinking_level", "level": "high"})
    send({"type": "prompt", "message": "READ_FILE hello.txt please"}, "agent_end")
    send({"type": "prompt", "message": "And a second turn."}, "agent_end")
    send({"type": "prompt", "message": "What is in this image?", "images": [{"type": "image", "data": PNG, "mimeType": "image/png"}]}, "agent_end")
    p.stdin.close()
    try: p.wait(10)
    except subprocess.TimeoutExpired: p.kill(); p.wait()

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
MADE_ID = re.compile(r"_1[0-9]{12}_")  # a Gemini call id made of a name, milliseconds and a count

def short(v):
    # Session ids and made call ids differ from run to run.
    if isinstance(v, str):
        v = MADE_ID.sub("_<ms>_", UUID.sub("<uuid>", v))
    if isinstance(v, str) and len(v) > 120:
        return "<%d chars %s: %r…>" % (len(v), hashlib.sha1(v.encode()).hexdigest()[:8], v[:50])
    return json.dumps(v) if not isinstance(v, str) else repr(v)

def flat(v, path="", out=None):
    if out is None: out = {}
    if isinstance(v, dict):
        if not v: out[path] = "{}"
        for k, x in v.items(): flat(x, path + "." + k, out)
    elif isinstance(v, list):
        if not v: out[path] = "[]"
        for i, x in enumerate(v): flat(x, "%s[%d]" % (path, i), out)
    else:
        out[path] = short(v)
    return out

def by_name(tools):
    named = {}
    for t in tools:
        n = t.get("name") or (t.get("function") or {}).get("name") if isinstance(t, dict) else None
        if not n: return tools
        named[n] = t
    return named

def keyed(body):
    # Tools by name, so that a tool one side has alone is one line.
    body = json.loads(json.dumps(body))
    if isinstance(body.get("tools"), list):
        if body["tools"] and "functionDeclarations" in body["tools"][0]:
            for t in body["tools"]: t["functionDeclarations"] = by_name(t["functionDeclarations"])
        else:
            body["tools"] = by_name(body["tools"])
    return body

SHOW_ALL = bool(os.environ.get("REQUEST_COMPARE_ALL"))
def by_design(k):
    # The system prompt's text and the tools' descriptions are rpi's own.
    return not SHOW_ALL and (k.endswith(".description") or k in (".messages[0].content", ".system[0].text", ".input[0].content",
        ".systemInstruction.parts[0].text", ".instructions"))

SKIP_HEADERS = {"host", "content-length", "connection", "accept-encoding"}
status = 0   # 1 when any request differs
for provider, model, api in MODELS:
    if only and model not in only and provider not in only: continue
    reqs = {}
    for target, cmd in (("pi", pi_cmd), ("rpi", rpi_cmd)):
        before = len(captured)
        run(target, cmd, provider, model)
        reqs[target] = captured[before:]
    print("=" * 78)
    print("%s/%s (%s): pi sent %d requests, rpi %d (a difference shows at the first request that has it)" % (provider, model, api, len(reqs["pi"]), len(reqs["rpi"])))
    seen = set()   # a difference shows once per model, at its first request
    def show(line):
        global status
        status = 1
        if line in seen: return False
        seen.add(line); print(line); return True
    for i in range(max(len(reqs["pi"]), len(reqs["rpi"]))):
        a = reqs["pi"][i] if i < len(reqs["pi"]) else None
        b = reqs["rpi"][i] if i < len(reqs["rpi"]) else None
        print("--- request %d: %s" % (i + 1, a[1] if a else b[1]))
        if not a or not b:
            show("    only %s sent request %d" % ("rpi" if b else "pi", i + 1)); continue
        if a[1] != b[1]: print("    path: pi %s, rpi %s" % (a[1], b[1]))
        ha = {k: v for k, v in a[2].items() if k not in SKIP_HEADERS}
        hb = {k: v for k, v in b[2].items() if k not in SKIP_HEADERS}
        for k in sorted(set(ha) | set(hb)):
            if short(ha.get(k, "-")) != short(hb.get(k, "-")):
                show("    header %-28s pi=%s  rpi=%s" % (k, short(ha.get(k, "-")), short(hb.get(k, "-"))))
        fa, fb = flat(keyed(a[3])), flat(keyed(b[3]))
        alone, hidden = set(), 0
        for k in sorted(set(fa) | set(fb)):
            parts = k.split(".")
            if ".tools." in k or "functionDeclarations." in k:
                t = ".".join(parts[:parts.index("tools") + 2 if "tools" in parts else parts.index("functionDeclarations") + 2])
                ta, tb = any(x.startswith(t + ".") for x in fa), any(x.startswith(t + ".") for x in fb)
                if ta != tb:
                    if t not in alone: show("    %-44s only %s has this tool" % (t, "pi" if ta else "rpi"))
                    alone.add(t); continue
            if fa.get(k) != fb.get(k):  # flat has made them short
                if by_design(k):
                    hidden += 1; continue
                show("    %-44s pi=%s  rpi=%s" % (k, fa.get(k, "-"), fb.get(k, "-")))
        if hidden and show("    (%d differences in the system prompt's text and tool descriptions; REQUEST_COMPARE_ALL=1 shows them)" % hidden): pass
    with open(os.path.join(work, "requests-%s-%s.json" % (provider, model.replace("/", "_"))), "w") as f:
        json.dump({t: [{"path": r[1], "headers": r[2], "body": r[3]} for r in reqs[t]] for t in reqs}, f, indent=1)
srv.shutdown()
sys.exit(status)
