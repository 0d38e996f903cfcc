package main

// rpi in pi-compatible mode, checked against a recording of pi 1.6 itself
// (testdata/pi16/).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recordKind names a record for comparison: its type, the command of a
// response, and the event type of a message_update.
func recordKind(rec map[string]json.RawMessage) string {
	var typ, command string
	json.Unmarshal(rec["type"], &typ)
	json.Unmarshal(rec["command"], &command)
	switch typ {
	case "response":
		return "response/" + command
	case "message_update":
		var ev struct{ Type string }
		json.Unmarshal(rec["assistantMessageEvent"], &ev)
		return "message_update/" + ev.Type
	case "message_start", "message_end":
		var m struct{ Role string }
		json.Unmarshal(rec["message"], &m)
		return typ + "/" + m.Role
	}
	return typ
}

// objectKeys lists a JSON object's keys in order ("" when it is not one).
func objectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		tok, _ := dec.Token()
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		dec.Decode(&skip)
	}
	return keys
}

// shapes maps each record kind to the key lists of its parts: the record,
// its data, and its assistantMessageEvent.
func shapes(t *testing.T, out []byte) map[string]map[string][]string {
	found := map[string]map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var rec map[string]json.RawMessage
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		kind := recordKind(rec)
		if _, ok := found[kind]; ok {
			continue
		}
		found[kind] = map[string][]string{"record": objectKeys(sc.Bytes()), "data": objectKeys(rec["data"]),
			"assistantMessageEvent": objectKeys(rec["assistantMessageEvent"]), "message": objectKeys(rec["message"])}
		// The messages a record lists (agent_end's, get_messages'), the
		// first of each role.
		var data struct{ Messages []json.RawMessage }
		json.Unmarshal(rec["data"], &data)
		var listed []json.RawMessage
		json.Unmarshal(rec["messages"], &listed)
		for _, m := range append(listed, data.Messages...) {
			var r struct{ Role string }
			json.Unmarshal(m, &r)
			if key := kind + "/messages/" + r.Role; found[key] == nil {
				found[key] = map[string][]string{"message": objectKeys(m)}
			}
		}
	}
	return found
}

// isSubsequence reports whether want's keys all appear in got, in order.
func isSubsequence(want, got []string) bool {
	i := 0
	for _, k := range got {
		if i < len(want) && want[i] == k {
			i++
		}
	}
	return i == len(want)
}

// knownDifferences are where rpi's contract differs from pi 1.6 on
// purpose, each with the reason (docs/pi-compat.md).
var knownDifferences = map[string]string{
	"response/set_thinking_level/record": "docs/models.md: set_thinking_level answers {requested, level}",
}

// TestPiTranscriptShapes feeds rpi, in pi-compatible mode, the lines a
// recorded pi 1.6 session got, against a fake model that answers the same
// way, and checks record by record that every key pi wrote is there, in
// pi's order (rpi may add keys of its own).
func TestPiTranscriptShapes(t *testing.T) {
	piOut, err := os.ReadFile("testdata/pi16/transcript.out.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	in, _ := os.ReadFile("testdata/pi16/transcript.in.jsonl")
	e, cwd := newTestEnv(t), t.TempDir()
	os.WriteFile(filepath.Join(cwd, "hello.txt"), []byte("hello from the file\n"), 0o644)
	startFakeModel(t, apiOpenAI, `{"text":["Hello from ","the fake model."],"usage":{"input":10,"output":5}}
{"toolCalls":[{"id":"call_fake_1","name":"read","args":["{\"path\":","\"hello.txt\"}"]}],"usage":{"input":20,"output":5}}
{"text":["The file says: hello from the file"],"usage":{"input":30,"output":8}}`, e.agentDir)
	ps := startSessionIn(t, e, []string{"rpc", "--compat", "pi", "--no-session", "--cwd", cwd})
	for _, line := range strings.Split(strings.TrimSpace(string(in)), "\n") {
		ps.send(line)
		var cmd struct{ ID, Type string }
		if json.Unmarshal([]byte(line), &cmd) == nil && cmd.Type == "prompt" {
			before := strings.Count(string(ps.out.bytes()), `"type":"agent_settled"`)
			waitUntil(t, ps, func(out string) bool { return strings.Count(out, `"type":"agent_settled"`) > before })
		}
		if cmd.Type == "bash" { // pi answers the next command after it; rpi's loop goes on meanwhile
			ps.waitFor(`"id":"` + cmd.ID + `","type":"response"`)
		}
	}
	ps.close()
	pi, ours := shapes(t, piOut), shapes(t, ps.out.bytes())
	compared := 0
	for kind, parts := range pi {
		got, ok := ours[kind]
		if !ok {
			t.Errorf("rpi wrote no %s record", kind)
			continue
		}
		for part, want := range parts {
			if reason, ok := knownDifferences[kind+"/"+part]; ok {
				t.Logf("%s %s differs on purpose: %s", kind, part, reason)
				continue
			}
			compared++
			if !isSubsequence(want, got[part]) {
				t.Errorf("%s %s: pi's keys %v, rpi's %v", kind, part, want, got[part])
			}
		}
	}
	if _, ok := ours["message_update/toolcall_end"]; compared < 60 || !ok {
		t.Errorf("compared only %d parts", compared)
	}
}
