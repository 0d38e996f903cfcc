package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// replayPrompt is the prompt messages' system messages add up to, replayed
// at once, as conversation.prompt replays them as they come.
func replayPrompt(messages []any) transcriptPrompt {
	var r promptReplay
	r.add(messages)
	return r.result()
}

// withoutSystem is messages without the system messages, for a test
// about the conversation's other messages.
func withoutSystem(messages []any) []any {
	var out []any
	for _, m := range messages {
		if raw, ok := m.(rawMessage); !ok || messageRole(json.RawMessage(raw)) != "system" {
			out = append(out, m)
		}
	}
	return out
}

// TestReplayPrompt replays system messages as pi 1.6's
// getCurrentSystemMessage does: a section set again keeps its place,
// null takes it out, tools are removed and added by name, a redeclared
// tool keeps its place; fields of the wrong type are left out.
func TestReplayPrompt(t *testing.T) {
	messages := []any{
		rawMessage(`{"role":"system","content":"Forced.","sections":{"preamble":"P","docs":"<docs>\nD\n</docs>","cwd":"<cwd>\n/a\n</cwd>"},"toolsAdded":[{"name":"read","description":"r","parameters":{}},{"name":"bash","description":"b","parameters":{}}],"timestamp":1}`),
		&userMessage{Role: "user", Content: textBlocks("hi")},
		rawMessage(`{"role":"custom","customType":"x","content":"not a prompt"}`),
		rawMessage(`{"role":"system","content":"","sections":{"docs":null,"cwd":"<cwd>\n/b\n</cwd>","skills":"S","bad":7},"toolsRemoved":[{"name":"read"}],"toolsAdded":[{"name":"bash","description":"b2","parameters":{}},{"name":"edit","description":"e","parameters":{}},{"description":"nameless"}],"timestamp":2}`),
		rawMessage(`{"role":"system","sections":"not an object","toolsAdded":{"name":"x"},"timestamp":3}`),
	}
	p := replayPrompt(messages)
	if want := "Forced.\n\nP\n\n<cwd>\n/b\n</cwd>\n\nS"; p.text() != want {
		t.Errorf("text %q, want %q", p.text(), want)
	}
	var names []string
	for _, tool := range p.tools {
		names = append(names, tool.name+"="+string(tool.json))
	}
	if got, want := strings.Join(names, " "), `bash={"name":"bash","description":"b2","parameters":{}} edit={"name":"edit","description":"e","parameters":{}}`; got != want {
		t.Errorf("tools %s, want %s", got, want)
	}
	if !p.found || replayPrompt(messages[1:3]).found {
		t.Error("found tells a conversation with a system message from one without")
	}
}

// TestPromptUpdate: the system message that brings a replayed prompt to
// the one wanted says only what differs, in pi 1.6's shape; nothing when
// nothing does.
func TestPromptUpdate(t *testing.T) {
	p := replayPrompt([]any{rawMessage(`{"role":"system","content":"","sections":{"preamble":"P","docs":"D","cwd":"C"},"toolsAdded":[{"name":"read","description":"r","parameters":{}},{"name":"bash","description":"b","parameters":{}}],"timestamp":1}`)})
	read := toolDeclaration{"read", []byte(`{"name":"read","description":"r","parameters":{}}`)}
	bash := toolDeclaration{"bash", []byte(`{"name":"bash","description":"b","parameters":{}}`)}
	same := []promptSection{{"preamble", "P"}, {"docs", "D"}, {"cwd", "C"}}
	if m := p.update(same, []toolDeclaration{read, bash}, 5); m != nil {
		t.Errorf("unchanged prompt: %s", m)
	}
	newBash := toolDeclaration{"bash", []byte(`{"name":"bash","description":"b2","parameters":{}}`)}
	got := string(p.update([]promptSection{{"preamble", "P"}, {"cwd", "C2"}, {"date", "T"}}, []toolDeclaration{newBash}, 5))
	want := `{"role":"system","content":"","sections":{"cwd":"C2","date":"T","docs":null},"timestamp":5,` +
		`"toolsAdded":[{"name":"bash","description":"b2","parameters":{}}],"toolsRemoved":[{"name":"read"},{"name":"bash"}]}`
	if got != want {
		t.Errorf("update\n%s\nwant\n%s", got, want)
	}
	if got, want := string(p.update(same, []toolDeclaration{read}, 6)), `{"role":"system","content":"","timestamp":6,"toolsRemoved":[{"name":"bash"}]}`; got != want {
		t.Errorf("tools only: %s, want %s", got, want)
	}
	// Applied, the update gives what was wanted.
	next := replayPrompt([]any{rawMessage(`{"role":"system","content":"","sections":{"preamble":"P","docs":"D","cwd":"C"},"toolsAdded":[{"name":"read","description":"r","parameters":{}},{"name":"bash","description":"b","parameters":{}}],"timestamp":1}`), rawMessage(want)})
	if next.text() != "P\n\nC2\n\nT" || len(next.tools) != 1 || string(next.tools[0].json) != string(newBash.json) {
		t.Errorf("replayed after the update: %q %v", next.text(), next.tools)
	}
}

// TestSystemMessagesSentAndKept: the model gets, as its one system
// prompt, what the conversation's system messages add up to; reopening
// the session and compacting it record no second one, since the prompt
// and tools did not change: the compaction keeps them whole
// (systemMessage), and the reopened session replays them from it.
func TestSystemMessagesSentAndKept(t *testing.T) {
	e, cwd := newTestEnv(t), t.TempDir()
	fm := startFakeModel(t, apiOpenAI, `{"text":["One."]}
{"text":["Summary."]}
{"text":["Two."]}`, e.agentDir)
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--session-id", "kept"})
	ps.send(`{"id":"p","type":"prompt","message":"first"}`)
	ps.waitFor(`"type":"agent_settled"`)
	ps.send(`{"id":"c","type":"compact"}`)
	ps.waitFor(`"id":"c"`)
	ps.close()
	fm.mu.Lock()
	first := fm.requests[0]
	fm.mu.Unlock()
	messages, _ := first["messages"].([]any)
	systems := 0
	for _, m := range messages {
		if m.(map[string]any)["role"] == "system" {
			systems++
		}
	}
	path := filepath.Join(defaultSessionDir(e.agentDir, cwd), "*_kept.jsonl")
	files, _ := filepath.Glob(path)
	if len(files) != 1 {
		t.Fatalf("session files %v", files)
	}
	ss, err := loadSessionFile(context.Background(), files[0])
	if err != nil {
		t.Fatal(err)
	}
	var recorded []any
	for _, entry := range ss.entries {
		if entry.role() == "system" {
			recorded = append(recorded, entry.msg)
		}
	}
	want := replayPrompt(recorded)
	if systems != 1 || len(recorded) != 1 || systemPromptOf(t, first) != want.text() || !strings.Contains(want.text(), "<cwd>\n"+cwd+"\n</cwd>") {
		t.Fatalf("%d system messages sent, %d recorded; sent %q, recorded %q", systems, len(recorded), systemPromptOf(t, first), want.text())
	}
	if head := compactionSystemMessage(ss.entries[len(ss.entries)-1]); head == nil || !sameText(head, want.text()) {
		t.Errorf("the compaction kept %s", head)
	}

	again := startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--session-id", "kept"})
	again.send(`{"id":"p","type":"prompt","message":"second"}`)
	again.waitFor(`"type":"agent_settled"`)
	again.close()
	if strings.Contains(string(again.out.bytes()), `"role":"system"`) {
		t.Errorf("the reopened session told a system message:\n%s", again.out.bytes())
	}
	if got := systemPromptOf(t, fm.lastRequest()); got != want.text() {
		t.Errorf("after reopening, the model got\n%s\nwant\n%s", got, want.text())
	}
}

// sameText reports whether the system message m alone gives text.
func sameText(m rawMessage, text string) bool {
	p := replayPrompt([]any{m})
	return p.text() == text
}

// hostileSystemMessage is a system message of a hostile session file: n
// sections and n tools, each named apart.
func hostileSystemMessage(n int) rawMessage {
	var b strings.Builder
	b.WriteString(`{"role":"system","content":"","sections":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"s%d":"x"`, i)
	}
	b.WriteString(`},"toolsAdded":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"t%d"}`, i)
	}
	b.WriteString(`],"timestamp":1}`)
	return rawMessage(b.String())
}

// TestReplayPromptManySections: a system message of many sections and
// tools, then one taking most of them out and adding one of them again,
// replays as pi 1.6's maps do: what is set again keeps its place, what
// came back after it went comes last.
func TestReplayPromptManySections(t *testing.T) {
	const n = 2000
	var nulls, removed strings.Builder
	for i := 1; i < n; i++ {
		fmt.Fprintf(&nulls, `"s%d":null,`, i)
		fmt.Fprintf(&removed, `{"name":"t%d"},`, i)
	}
	p := replayPrompt([]any{hostileSystemMessage(n),
		rawMessage(`{"role":"system","content":"","sections":{` + nulls.String() + `"s5":"back","s0":"first"},"toolsRemoved":[` + removed.String() + `{"name":"t0"}],"toolsAdded":[{"name":"t7"},{"name":"t0","description":"again"}],"timestamp":2}`),
		rawMessage(`{"role":"system","content":"","sections":{"s5":null,"s9":"last"},"timestamp":3}`),
	})
	if got, want := p.text(), "first\n\nlast"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	var tools []string
	for _, tool := range p.tools {
		tools = append(tools, string(tool.json))
	}
	if got, want := strings.Join(tools, " "), `{"name":"t7"} {"name":"t0","description":"again"}`; got != want {
		t.Errorf("tools %s, want %s", got, want)
	}
	if p.section("s0") != 0 || p.section("s9") != 1 || p.section("s5") != -1 || p.tool("t0") != 1 || p.tool("t1") != -1 {
		t.Errorf("the index by name: %v %v", p.sectionAt, p.toolAt)
	}
}

// BenchmarkReplayPromptSections replays a hostile system message of 5,000
// and 40,000 sections and tools and reports the time per section of each
// and their ratio: about 1 when the replay is linear (it was 9.6 when each
// section was looked for among those before it: 6.5 s for a 1.2 MB
// message, at every request of the session).
func BenchmarkReplayPromptSections(b *testing.B) {
	perSection := func(n int) float64 {
		messages := []any{hostileSystemMessage(n)}
		start := time.Now()
		for range b.N {
			replayPrompt(messages)
		}
		return float64(time.Since(start).Nanoseconds()) / float64(b.N*n)
	}
	short, long := perSection(5_000), perSection(40_000)
	b.ReportMetric(short, "ns/section-5k")
	b.ReportMetric(long, "ns/section-40k")
	b.ReportMetric(long/short, "40k/5k")
}

// TestCompactionSystemMessageNotUTF8: a compaction's systemMessage with
// bytes that are not UTF-8 (in a section's name and text) reaches no
// client as they are: get_messages writes each as U+FFFD, as it writes a
// message entry's, and the next prompt's system message takes that
// section, named as read, out.
func TestCompactionSystemMessageNotUTF8(t *testing.T) {
	e, cwd := newTestEnv(t), t.TempDir()
	fm := startFakeModel(t, apiOpenAI, `{"text":["Fine."]}`, e.agentDir)
	path := filepath.Join(t.TempDir(), "bytes.jsonl")
	file := `{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-000000000003","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x"}
{"type":"model_change","id":"a0","parentId":null,"timestamp":"2026-03-16T09:00:00.000Z","provider":"fake","modelId":"fake-model"}
{"type":"message","id":"a1","parentId":"a0","timestamp":"2026-03-16T09:00:00.000Z","message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1}}
{"type":"compaction","id":"a2","parentId":"a1","timestamp":"2026-03-16T09:00:00.000Z","summary":"S","firstKeptEntryId":"a1","tokensBefore":1,"systemMessage": {"role": "system", "content": "", "sections": {"pre\xffamble": "A \xfe B"}, "timestamp": 1}}
`
	file = strings.NewReplacer(`\xff`, "\xff", `\xfe`, "\xfe").Replace(file)
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--session", path})
	ps.send(`{"id":"m","type":"get_messages"}`)
	ps.waitFor(`"id":"m"`)
	ps.send(`{"id":"p","type":"prompt","message":"again"}`)
	ps.waitFor(`"type":"agent_settled"`)
	ps.close()
	for _, line := range strings.Split(strings.TrimSuffix(string(ps.out.bytes()), "\n"), "\n") {
		if !utf8.ValidString(line) {
			t.Errorf("a line that is not UTF-8: %q", line)
		}
		if strings.HasPrefix(line, `{"id":"m"`) && !strings.Contains(line, "{\"role\":\"system\",\"content\":\"\",\"sections\":{\"pre\uFFFDamble\":\"A \uFFFD B\"},\"timestamp\":1}") {
			t.Errorf("get_messages: %s", line)
		}
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `"sections":{"preamble":`) || !strings.Contains(string(data), "\"pre\uFFFDamble\":null}") {
		t.Errorf("the prompt rpi recorded does not take out the section the compaction kept:\n%s", data)
	}
	if got := systemPromptOf(t, fm.lastRequest()); strings.Contains(got, "A \uFFFD B") {
		t.Errorf("the model got %q", got)
	}
}

// TestToolsRestoredFromTheSession: a session opened again gets back the
// tools its system messages declared last (read, grep; bash and todo
// were removed) among those rpi offers now, when it runs with the
// default selection, which --tools' +name and -name entries,
// --exclude-tools and settings.json's defaultTools change; a list of
// names, --no-tools or --no-builtin-tools set the tools whatever the
// session had, and a session without a system message gets the
// selection. A tool the selection leaves out never comes back (grep
// without +grep; bash, which the session had once, under a defaultTools
// without it). The tools are those of the model's request.
func TestToolsRestoredFromTheSession(t *testing.T) {
	for _, c := range []struct {
		name, settings string
		args           []string
		system         bool
		want           string
	}{
		{"default selection", "", nil, true, "read,process,ask_user"},
		{"+grep", "", []string{"--tools", "+grep"}, true, "read,process,ask_user,grep"},
		{"+name and -name", "", []string{"--tools", "+bash,-ask_user"}, true, "read,bash,process"},
		{"excluded", "", []string{"--tools", "+grep", "--exclude-tools", "read"}, true, "process,ask_user,grep"},
		{"defaultTools", `{"defaultTools":["read","grep","edit"]}`, nil, true, "read,grep"},
		{"a list of names", "", []string{"--tools", "read,bash"}, true, "read,bash"},
		{"no tools", "", []string{"--no-tools"}, true, ""},
		{"no built-in tools", "", []string{"--no-builtin-tools"}, true, ""},
		{"no system message", "", nil, false, strings.Join(defaultTools, ",")},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, cwd := newTestEnv(t), t.TempDir()
			fm := startFakeModel(t, apiOpenAI, `{"text":["Again."]}`, e.agentDir)
			if c.settings != "" {
				os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(c.settings), 0o644)
			}
			dir := defaultSessionDir(e.agentDir, cwd)
			os.MkdirAll(dir, 0o755)
			lines := `{"type":"session","version":3,"id":"kept","timestamp":"2026-03-16T09:00:00.000Z","cwd":` + strconv.Quote(cwd) + "}\n"
			if c.system {
				lines += `{"type":"message","id":"a1","parentId":null,"timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"system","content":"","sections":{"preamble":"Old."},"timestamp":1,` +
					`"toolsAdded":[{"name":"read","description":"R.","parameters":{}},{"name":"grep","description":"G.","parameters":{}},{"name":"bash","description":"B.","parameters":{}},{"name":"todo","description":"T.","parameters":{}}]}}` + "\n" +
					`{"type":"message","id":"a2","parentId":"a1","timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"system","content":"","timestamp":1,"toolsRemoved":[{"name":"bash"},{"name":"todo"}]}}` + "\n"
			}
			os.WriteFile(filepath.Join(dir, "2026-03-16T09-00-00-000Z_kept.jsonl"), []byte(lines), 0o644)
			ps := startSessionIn(t, e, append([]string{"rpc", "--cwd", cwd, "--session-id", "kept"}, c.args...))
			ps.send(`{"id":"p","type":"prompt","message":"again"}`)
			ps.waitFor(`"type":"agent_settled"`)
			ps.close()
			fm.mu.Lock()
			defer fm.mu.Unlock()
			if len(fm.requests) != 1 {
				t.Fatalf("%d requests", len(fm.requests))
			}
			tools, _ := fm.requests[0]["tools"].([]any)
			var names []string
			for _, tl := range tools {
				names = append(names, tl.(map[string]any)["function"].(map[string]any)["name"].(string))
			}
			if got := strings.Join(names, ","); got != c.want {
				t.Errorf("the model was offered %q, want %q", got, c.want)
			}
		})
	}
}

// TestSystemMessageFieldsExact: a system message's fields are read by
// their exact names, as pi 1.6 reads them (encoding/json's struct fields
// would take any case): a message whose role, sections, tools or a
// removed tool's name are spelled otherwise says nothing of them; the
// last of a field given twice is the one read, as JSON.parse keeps it.
// A message nested deeper than scanObject follows is read all the same
// (it was no system message, as pi reads it).
func TestSystemMessageFieldsExact(t *testing.T) {
	base := rawMessage(`{"role":"system","content":"","sections":{"preamble":"P."},"toolsAdded":[{"name":"read","description":"R.","parameters":{}},{"name":"bash","description":"B.","parameters":{}}]}`)
	for _, c := range []struct {
		name, msg, sections, tools string
	}{
		{"another role's case", `{"ROLE":"system","content":"","sections":{"cwd":"C."}}`, "preamble", "read,bash"},
		{"fields in another case", `{"role":"system","content":"","Sections":{"cwd":"C."},"ToolsAdded":[{"name":"ls","description":"L.","parameters":{}}],"TOOLSREMOVED":[{"name":"read"}]}`, "preamble", "read,bash"},
		{"a removed tool's name in another case", `{"role":"system","content":"","toolsRemoved":[{"NAME":"read"},{"name":"bash"}]}`, "preamble", "read"},
		{"a declared tool's name in another case", `{"role":"system","content":"","toolsAdded":[{"Name":"ls","description":"L.","parameters":{}}]}`, "preamble", "read,bash"},
		{"the last of a field twice", `{"role":"system","content":"","sections":{"cwd":"C."},"sections":{"date":"D."}}`, "preamble,date", "read,bash"},
		{"nested past the scanner's depth", `{"role":"system","content":"","role":"system","toolsRemoved":[{"name":"bash"}],"toolsAdded":[{"name":"ls","description":"L.","parameters":` +
			strings.Repeat(`{"a":`, maxScanDepth+10) + "1" + strings.Repeat("}", maxScanDepth+10) + `}]}`, "preamble", "read,ls"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := replayPrompt([]any{base, rawMessage(c.msg)})
			var sections, tools []string
			for _, s := range p.sections {
				sections = append(sections, s.name)
			}
			for _, tl := range p.tools {
				tools = append(tools, tl.name)
			}
			if strings.Join(sections, ",") != c.sections || strings.Join(tools, ",") != c.tools {
				t.Errorf("sections %v, tools %v; want %s and %s", sections, tools, c.sections, c.tools)
			}
		})
	}
}
