package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestExportHTMLIsUTF8: the page says it is UTF-8, and is, whatever the
// conversation holds. The user's bash keeps its output's bytes as they
// came (a binary file cat'ed, a Latin-1 one), and those reached the page
// as they were: each byte that is not part of a character is written as
// U+FFFD, as get_messages and the session file have it, and a character
// cut nowhere else is kept.
func TestExportHTMLIsUTF8(t *testing.T) {
	const bad = "a\xff\xfe<\xc0é\xe2\x82" // two stray bytes, a lone lead, a character, a cut one
	messages := []any{
		bashExecutionMessage{Role: "bashExecution", Command: "cat x" + bad, Output: bad},
		&userMessage{Role: "user", Content: []contentBlock{{Type: "text", Text: bad}, {Type: "image", MimeType: "image/png" + bad, Data: bad}}},
		&assistantMessage{Role: "assistant", Provider: bad, Model: bad, Content: []contentBlock{
			{Type: "thinking", Thinking: bad}, {Type: "toolCall", Name: bad, Arguments: json.RawMessage(`"` + bad + `"`)}},
			StopReason: "error", ErrorMessage: bad},
		&toolResultMessage{Role: "toolResult", ToolName: bad, Content: textBlocks(bad)},
		&summaryMessage{Role: "compactionSummary" + bad, Summary: bad},
		rawMessage(`{"role":"custom","content":"` + bad + `"}`),
	}
	var page bytes.Buffer
	if err := writeHTML(bufio.NewWriter(&page), sessionHeader{ID: bad, Timestamp: bad, Cwd: bad}, bad, messages); err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(page.Bytes()) {
		t.Errorf("the page is not UTF-8:\n%q", page.Bytes())
	}
	const want = "a\uFFFD\uFFFD&lt;\uFFFDé\uFFFD\uFFFD"
	if n := strings.Count(page.String(), want); n != 21 {
		t.Errorf("%q appears %d times, want 21 (every value):\n%s", want, n, page.Bytes())
	}
}

// TestExportReplacesWhole: an export that fails leaves the file that was
// at its path as it was, and nothing beside it; it truncated that file
// first and left the part it wrote. Two exports to one path at once
// leave one of the pages whole; each truncated the file and wrote at its
// own offset, so that the later one's bytes landed inside the other's.
func TestExportReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "page.html")
	os.WriteFile(path, []byte("old"), 0o640)
	failed := replaceFileWith(path, func(w *bufio.Writer) error {
		w.WriteString("part of a page")
		w.Flush()
		return errors.New("no space left on device")
	})
	if failed == nil || failed.Error() != "no space left on device" {
		t.Errorf("the failed export: %v", failed)
	}
	if data, _ := os.ReadFile(path); string(data) != "old" {
		t.Errorf("after a failed export the file holds %q, want it as it was", data)
	}
	if names, _ := os.ReadDir(dir); len(names) != 1 {
		t.Errorf("the folder holds %v, want page.html only", names)
	}

	long := strings.Repeat("A", 1<<16)
	halfway, done := make(chan struct{}), make(chan error)
	go func() {
		done <- replaceFileWith(path, func(w *bufio.Writer) error {
			w.WriteString(long)
			w.Flush()
			halfway <- struct{}{}
			<-halfway
			w.WriteString(long)
			return w.Flush()
		})
	}()
	<-halfway
	if err := replaceFileWith(path, func(w *bufio.Writer) error { w.WriteString("B"); return w.Flush() }); err != nil {
		t.Fatal(err)
	}
	halfway <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != long+long && string(data) != "B" {
		t.Errorf("after two exports at once the file holds %d bytes starting %q, want one of them whole", len(data), data[:min(len(data), 8)])
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o640 {
		t.Errorf("the page's mode: %v (%v), want the replaced file's, 0640", info.Mode(), err)
	}
	if names, _ := os.ReadDir(dir); len(names) != 1 {
		t.Errorf("the folder holds %v, want page.html only", names)
	}
}

// TestExportLongName: a path whose name is as long as a name may be is
// written, as it was when the page was written in place. The new file
// made beside it is named after it, 22 bytes longer (.NAME.HEX.tmp), so
// a name over 233 bytes (NAME_MAX is 255) failed with "file name too
// long", a session file's default page too (NAME.jsonl of 235 bytes or
// more); that new file now has a short name when the long one cannot be.
func TestExportLongName(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{233, 250, 255} {
		path := filepath.Join(dir, strings.Repeat("p", n-len(".html"))+".html")
		for range 2 { // a new file, then one replaced
			if err := replaceFileWith(path, func(w *bufio.Writer) error { w.WriteString("page"); return w.Flush() }); err != nil {
				t.Fatalf("a name of %d bytes: %v", n, err)
			}
		}
		if data, _ := os.ReadFile(path); string(data) != "page" {
			t.Errorf("a name of %d bytes holds %q", n, data)
		}
	}
	if names, _ := os.ReadDir(dir); len(names) != 3 {
		t.Errorf("the folder holds %v, want the 3 pages only", names)
	}
}

// TestExportForeignFileMode: a file of another user at the path (planted
// beside a session file someone else wrote, in a folder they can write
// to) is replaced as a new page is made, 0666 less the umask: its mode was
// kept, so one planted 0666 made the user's page, with the conversation
// in it, readable and writable by the one who planted it, whatever the
// user's umask. A file of the user's own keeps its mode.
func TestExportForeignFileMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a file of another user needs root")
	}
	dir := t.TempDir()
	page := func(w *bufio.Writer) error { w.WriteString("page"); return w.Flush() }
	fresh := filepath.Join(dir, "fresh.html")
	if err := replaceFileWith(fresh, page); err != nil {
		t.Fatal(err)
	}
	newMode, _ := os.Stat(fresh)
	planted := filepath.Join(dir, "planted.html")
	os.WriteFile(planted, []byte("theirs"), 0o666)
	os.Chmod(planted, 0o666)
	if err := os.Chown(planted, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := replaceFileWith(planted, page); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(planted); err != nil || info.Mode() != newMode.Mode() {
		t.Errorf("the page over another user's 0666 file: %v (%v), want a new page's %v", info.Mode(), err, newMode.Mode())
	}
	os.Chmod(fresh, 0o604)
	if err := replaceFileWith(fresh, page); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(fresh); err != nil || info.Mode().Perm() != 0o604 {
		t.Errorf("the page over the user's own 0604 file: %v (%v), want it kept", info.Mode(), err)
	}
}

// TestExportHTMLSystemMessages: a system message is shown as the system
// prompt (the first) or an update of it (a later one), as pi 1.6's export
// shows it, apart from the user's messages: its text, the sections that
// went and the names of the tools added and removed; not its JSON (the
// tools' schemas, some 8 KB, written as a message of the user's).
func TestExportHTMLSystemMessages(t *testing.T) {
	messages := []any{
		rawMessage(`{"role":"system","content":"","sections":{"preamble":"Be <brief>.","cwd":"<cwd>\n/p\n</cwd>"},"timestamp":1,"toolsAdded":[{"name":"read","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}},{"name":"bash","description":"Run","parameters":{}}]}`),
		&userMessage{Role: "user", Content: textBlocks("hi")},
		rawMessage(`{"role":"system","content":"","sections":{"cwd":null,"date":"<date>\n2026-12-07\n</date>"},"timestamp":2,"toolsAdded":[{"name":"edit","description":"Edit","parameters":{}}],"toolsRemoved":[{"name":"bash"}]}`),
	}
	var page bytes.Buffer
	w := bufio.NewWriter(&page)
	if err := writeHTML(w, sessionHeader{ID: "id"}, "", messages); err != nil {
		t.Fatal(err)
	}
	got := page.String()
	for _, want := range []string{
		`<div class="m system"><div class="role">system prompt</div><pre>Be &lt;brief&gt;.</pre><pre>&lt;cwd&gt;` + "\n/p\n" + `&lt;/cwd&gt;</pre><pre>tools: read, bash</pre></div>`,
		`<div class="m system"><div class="role">system prompt update</div><pre>section cwd removed</pre><pre>&lt;date&gt;` + "\n2026-12-07\n" + `&lt;/date&gt;</pre><pre>tools added: edit</pre><pre>tools removed: bash</pre></div>`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the page lacks\n%s\n%s", want, got)
		}
	}
	if strings.Contains(got, "toolsAdded") || strings.Contains(got, "Read a file") {
		t.Errorf("the page shows a system message's JSON:\n%s", got)
	}
}
