package main

// rpi in pi-compatible mode, checked against a recording of pi 1.6 itself
// (testdata/pi16/).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	case "extension_ui_request":
		var req struct{ Method string }
		json.Unmarshal(rec["method"], &req.Method)
		return typ + "/" + req.Method
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

// withoutKey is keys without key. The order of errorMessage
// among an answer's keys is not compared: pi 1.6's own changes with where
// the answer ended (after timestamp when the stream failed, before it when
// the request was never made), and a JSON client reads keys by name.
func withoutKey(keys []string, key string) []string {
	return slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == key })
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
	compared := compareShapes(t, piOut, ps.out.bytes())
	if _, ok := shapes(t, ps.out.bytes())["message_update/toolcall_end"]; compared < 60 || !ok {
		t.Errorf("compared only %d parts", compared)
	}
}

// compareShapes checks that every key pi wrote in a record of each kind
// is in rpi's first record of that kind, in pi's order, and says how many
// parts it compared.
func compareShapes(t *testing.T, piOut, rpiOut []byte) int {
	t.Helper()
	pi, ours := shapes(t, piOut), shapes(t, rpiOut)
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
			if !isSubsequence(want, got[part]) && !isSubsequence(withoutKey(want, "errorMessage"), withoutKey(got[part], "errorMessage")) ||
				slices.Contains(want, "errorMessage") && !slices.Contains(got[part], "errorMessage") {
				t.Errorf("%s %s: pi's keys %v, rpi's %v", kind, part, want, got[part])
			}
		}
	}
	return compared
}

// TestPiTranscripts runs rpi, in pi-compatible mode, through each scenario
// recorded from pi 1.6 under testdata/pi16/ (a folder with in.jsonl,
// model.jsonl and pi's out.jsonl; scripts/pi-transcripts.sh records them),
// with the fake model answering from the same script, and compares rpi's
// output with pi's: the keys of every kind of record (as
// TestPiTranscriptShapes does), and the kinds of the records in order
// (kindSequence), apart from the differences listed in
// knownSequenceDifferences. No value is compared: ids, timestamps,
// durations and token counts differ from run to run.
func TestPiTranscripts(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/pi16/*/in.jsonl")
	if len(dirs) < 5 {
		t.Fatalf("found only %d scenarios", len(dirs))
	}
	for _, in := range dirs {
		dir := filepath.Dir(in)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			read := func(name string) []byte {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			input, script, piOut := read("in.jsonl"), read("model.jsonl"), read("out.jsonl")
			e, cwd := newTestEnv(t), t.TempDir()
			os.WriteFile(filepath.Join(cwd, "hello.txt"), []byte("hello from the file\n"), 0o644)
			startFakeModel(t, apiOpenAI, string(script), e.agentDir)
			ps := startSessionIn(t, e, []string{"rpc", "--compat", "pi", "--no-session", "--cwd", cwd})
			for _, line := range strings.Split(strings.TrimSpace(string(input)), "\n") {
				var n int
				var text string
				if _, err := fmt.Sscanf(line, "#wait %d", &n); err == nil {
					text = line[len(fmt.Sprintf("#wait %d ", n)):]
					waitUntil(t, ps, func(out string) bool { return strings.Count(out, text) >= n })
					continue
				}
				ps.send(line)
			}
			ps.close()
			out := ps.out.bytes()
			if d := os.Getenv("DUMPDIR"); d != "" {
				os.WriteFile(filepath.Join(d, filepath.Base(dir)+".jsonl"), out, 0o644)
			}
			compareShapes(t, piOut, out)
			want, got := kindSequence(piOut, piOnlyKinds), kindSequence(out, rpiOnlyKinds)
			if !slices.Equal(want, got) {
				t.Errorf("the events' kinds differ from pi's:\n%s", sequenceDiff(want, got))
			}
			if want, got := commandAnswers(piOut), commandAnswers(out); !slices.Equal(want, got) {
				t.Errorf("the answers differ from pi's:\npi:  %q\nrpi: %q", want, got)
			}
		})
	}
}

// rpiOnlyKinds are records rpi writes that pi 1.6 does not, left out of
// the comparison of kinds: clients ignore events they do not know
// (docs/pi-compat.md).
var rpiOnlyKinds = map[string]string{
	"session_started":                "rpi's first line, kept in pi-compatible mode (docs/pi-compat.md)",
	"extension_ui_request/setStatus": "rpi tells the agent's activity (docs/ui.md); pi's clients show or ignore it",
	"extension_ui_request/notify":    "rpi tells the user of retries, compaction and the like (docs/ui.md)",
	"run_failed":                     "rpi says why a run failed, once no retry is left (docs/protocol.md)",
}

// piOnlyKinds are records pi 1.6 writes that rpi does not, with the reason.
var piOnlyKinds = map[string]string{}

// kindSequence lists the kinds of out's events in order (recordKind),
// leaving out those in skip and the answers to commands (see commandAnswers),
// and counting a run of deltas of one kind (or
// of tool or bash output updates) as one: how a stream is cut into pieces
// is the transport's, not something a client can count on.
func kindSequence(out []byte, skip map[string]string) []string {
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var rec map[string]json.RawMessage
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		kind := recordKind(rec)
		if _, ok := skip[kind]; ok || strings.HasPrefix(kind, "response/") {
			continue
		}
		run := strings.HasSuffix(kind, "_delta") || kind == "tool_execution_update" || kind == "bash_execution_update"
		if run && len(kinds) > 0 && kinds[len(kinds)-1] == kind {
			continue
		}
		kinds = append(kinds, kind)
	}
	return kinds
}

// sequenceDiff shows two kind sequences side by side from a few records
// before their first difference.
func sequenceDiff(want, got []string) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-4s %-40s %s\n", "#", "pi 1.6", "rpi")
	for j := max(0, i-5); j < max(len(want), len(got)) && j < i+25; j++ {
		w, g := "", ""
		if j < len(want) {
			w = want[j]
		}
		if j < len(got) {
			g = got[j]
		}
		mark := " "
		if w != g {
			mark = "≠"
		}
		fmt.Fprintf(&b, "%-4d %-40s %s %s\n", j, w, mark, g)
	}
	return b.String()
}

// commandAnswers lists out's answers to commands, each as its id, command and
// whether it succeeded, sorted by id: pi answers a command when its
// handler is done, and the handlers of the lines it reads run side by
// side (steer: the prompt queued with streamingBehavior is answered
// before the steer sent ahead of it), so a client matches answers to
// commands by id (docs/protocol.md), never by where they come.
func commandAnswers(out []byte) []string {
	var list []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r struct {
			ID      any
			Type    string
			Command string
			Success bool
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.Type == "response" {
			list = append(list, fmt.Sprintf("%v %s %v", r.ID, r.Command, r.Success))
		}
	}
	slices.Sort(list)
	return list
}
