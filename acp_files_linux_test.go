package main

// The editor's files (ACP's fs/read_text_file and fs/write_text_file)
// against a hostile model: what rpi refuses on disk it does not ask the
// editor for. Linux: /proc, /sys and FIFOs.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// TestACPEditorReadsOnlyWhatTheDiskWould: with an editor that reads and
// writes files for rpi, the model's read of /proc/self/environ,
// /dev/zero, a FIFO, a file of /sys, a folder, or a symlink to any of
// them — and of a name under /proc/self/fd that rpi does not have open
// (the editor's /proc/self is its own) — is never sent to the editor: it
// fails with the error the disk gives, word for word. So do a write and
// an edit through such a symlink, and a prompt's resource_link to such a
// file. A plain file is still read and written through the editor.
func TestACPEditorReadsOnlyWhatTheDiskWould(t *testing.T) {
	cwd := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(cwd, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	const noFD = "/proc/self/fd/987" // open in the editor, say; not in rpi
	for link, to := range map[string]string{"env-link": "/proc/self/environ", "pipe-link": filepath.Join(cwd, "pipe"),
		"zero-link": "/dev/zero", "fd-link": noFD, "fd-dir": "/proc/self/fd"} {
		if err := os.Symlink(to, filepath.Join(cwd, link)); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(cwd, "folder"), 0o755)
	os.WriteFile(filepath.Join(cwd, "notes.txt"), []byte("on disk\n"), 0o644)
	refused := []string{"/proc/self/environ", "/dev/zero", "pipe", "folder", "env-link", "pipe-link", "zero-link",
		"fd-link", noFD, "/dev/fd/987", "fd-dir/987"}
	for _, f := range []string{"/sys/kernel/uevent_seqnum", "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/power/state"} {
		if info, err := os.Stat(f); err == nil && info.Mode().IsRegular() {
			refused = append(refused, f)
			break
		}
	}
	var calls []string
	call := func(id, tool string, args map[string]string) {
		a, _ := json.Marshal(args)
		pieces, _ := json.Marshal([]string{string(a)})
		calls = append(calls, fmt.Sprintf(`{"id":%q,"name":%q,"args":%s}`, id, tool, pieces))
	}
	for i, p := range refused {
		call(fmt.Sprint("r", i), "read", map[string]string{"path": p})
	}
	call("w1", "write", map[string]string{"path": "env-link", "content": "x"})
	call("w2", "write", map[string]string{"path": "fd-link", "content": "x"})
	call("w3", "write", map[string]string{"path": "fd-dir/988", "content": "x"})
	edit, _ := json.Marshal(`{"path":"pipe-link","edits":[{"oldText":"a","newText":"b"}]}`)
	calls = append(calls, `{"id":"e1","name":"edit","args":[`+string(edit)+`]}`)
	call("ok", "read", map[string]string{"path": "notes.txt"})
	script := `{"toolCalls":[` + strings.Join(calls, ",") + `]}` + "\n" + `{"text":["done"]}`
	links := []any{}
	for _, p := range []string{"/proc/self/environ", filepath.Join(cwd, "pipe-link"), filepath.Join(cwd, "fd-link")} {
		links = append(links, map[string]string{"type": "resource_link", "uri": "file://" + p, "name": filepath.Base(p)})
	}

	type run struct {
		results map[string]string // by tool call: its status and its text
		prompt  string            // the user message the links became
		asked   []string          // what the editor was asked: method and path
	}
	runs := map[string]*run{}
	for _, via := range []string{"disk", "editor"} {
		r := &run{results: map[string]string{}}
		runs[via] = r
		e := newTestEnv(t)
		startFakeModel(t, apiOpenAI, script, e.agentDir)
		c, a, _ := startACPAgent(t, e, nil)
		var mu sync.Mutex
		c.answer = func(method string, params json.RawMessage) (any, *acpError) {
			var p struct{ Path string }
			json.Unmarshal(params, &p)
			mu.Lock()
			r.asked = append(r.asked, method+" "+p.Path)
			mu.Unlock()
			if method == "fs/read_text_file" {
				return map[string]string{"content": "the editor's text of " + p.Path}, nil
			}
			return struct{}{}, nil
		}
		caps := map[string]any{}
		if via == "editor" {
			caps["fs"] = map[string]bool{"readTextFile": true, "writeTextFile": true}
		}
		sid := openACPSession(t, c, caps, cwd)
		if got := c.call("session/prompt", acpTextPrompt(sid, "look", links...)); stopReasonOf(got.Result) != "end_turn" {
			t.Fatalf("%s: the prompt: %s", via, got.line)
		}
		for _, m := range c.messages() {
			if u := m.update(); u != nil && (u["status"] == "completed" || u["status"] == "failed") {
				out, _ := json.Marshal(u["rawOutput"])
				r.results[u["toolCallId"].(string)] = fmt.Sprint(u["status"], " ", string(out))
			}
		}
		r.prompt, _ = userText(a.sessions[sid].s.conv.messages()[0])
	}
	disk, editor := runs["disk"], runs["editor"]
	for id, want := range disk.results {
		if id == "ok" {
			continue
		}
		if !strings.HasPrefix(want, "failed ") {
			t.Errorf("%s from the disk: %s", id, want)
		}
		if got := editor.results[id]; got != want {
			t.Errorf("%s through the editor: %s\nfrom the disk:          %s", id, got, want)
		}
	}
	if len(disk.results) != len(calls) {
		t.Errorf("%d calls ended, want %d: %v", len(disk.results), len(calls), disk.results)
	}
	if editor.prompt != disk.prompt {
		t.Errorf("the prompt's links through the editor:\n%s\nfrom the disk:\n%s", editor.prompt, disk.prompt)
	}
	okPath := filepath.Join(cwd, "notes.txt")
	if want := []string{"fs/read_text_file " + okPath}; !slices.Equal(editor.asked, want) {
		t.Errorf("the editor was asked %q, want %q", editor.asked, want)
	}
	if !strings.Contains(editor.results["ok"], "the editor's text of "+okPath) {
		t.Errorf("a plain file through the editor: %s", editor.results["ok"])
	}
}

// TestACPEditorReadOfAPathSwapped: a path that leads elsewhere once the
// editor has answered (the model's background process put a symlink to
// the editor's environment in its place, say) fails the read: what the
// editor gave is not what was checked, and it reaches neither the model
// nor the diff.
func TestACPEditorReadOfAPathSwapped(t *testing.T) {
	e := newTestEnv(t)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"read","args":["{\"path\":\"notes.txt\"}"]}]}`+"\n"+`{"text":["done"]}`, e.agentDir)
	c, _, _ := startACPAgent(t, e, nil)
	cwd := t.TempDir()
	notes := filepath.Join(cwd, "notes.txt")
	os.WriteFile(notes, []byte("plain\n"), 0o644)
	c.answer = func(method string, params json.RawMessage) (any, *acpError) {
		os.Rename(notes, notes+".old") // swapped while the editor reads
		os.Symlink("/proc/self/environ", notes)
		return map[string]string{"content": "SECRET_KEY=editor's own\n"}, nil
	}
	sid := openACPSession(t, c, map[string]any{"fs": map[string]bool{"readTextFile": true}}, cwd)
	c.call("session/prompt", acpTextPrompt(sid, "read"))
	var end string
	for _, m := range c.messages() {
		if u := m.update(); u != nil && u["toolCallId"] == "c1" && u["status"] != "in_progress" && u["sessionUpdate"] == "tool_call_update" {
			end = m.line
		}
	}
	want := `"status":"failed","content":[{"type":"content","content":{"type":"text","text":"Cannot read ` + notes + `: the path changed while the editor read it; nothing was read"}}]`
	if !strings.Contains(end, want) {
		t.Errorf("the read of a path swapped meanwhile: %s\nwant %s", end, want)
	}
	if all := strings.Join(c.lines(), "\n"); strings.Contains(all, "SECRET_KEY") {
		t.Errorf("what the editor read went on:\n%s", all)
	}
}
