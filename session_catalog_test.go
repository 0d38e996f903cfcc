package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// bigSession is a session file of size bytes made up as it is read: a
// header and a user message, then one long answer, then a rename. It
// counts the bytes read.
type bigSession struct {
	head, tail string
	size, read int64
}

func (b *bigSession) ReadAt(p []byte, off int64) (int, error) {
	if off >= b.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), b.size-off))
	tailAt := b.size - int64(len(b.tail))
	for i := range n {
		at := off + int64(i)
		switch {
		case at < int64(len(b.head)):
			p[i] = b.head[at]
		case at >= tailAt:
			p[i] = b.tail[at-tailAt]
		default:
			p[i] = 'x'
		}
	}
	b.read += int64(n)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// TestSessionRowOfHugeFile: a 1 GiB session costs its head and tail, not
// 1 GiB: the row has its id, cwd, summary and late name, and no count.
func TestSessionRowOfHugeFile(t *testing.T) {
	f := &bigSession{size: 1 << 30,
		head: `{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}` + "\n" +
			`{"type":"session_info","id":"e0","parentId":null,"name":"Early"}` + "\n" +
			`{"type":"message","id":"e1","parentId":"e0","message":{"role":"user","content":"First line\nsecond"}}` + "\n" +
			`{"type":"message","id":"e2","parentId":"e1","message":{"role":"assistant","content":[{"type":"text","text":"`,
		tail: `"}]}}` + "\n" + `{"type":"session_info","id":"e3","parentId":"e2","name":"Late"}` + "\n" +
			`{"type":"message","id":"e4","parentId":"e3","message":{"role":"user","content":"\"session_info\" in a message"}}` + "\n",
	}
	row, ok := sessionRowOf(f, f.size)
	if !ok || row.SessionID != "s1" || row.Cwd != "/p" || row.Summary != "First line" || row.Name == nil || *row.Name != "Late" || row.MessageCount != nil {
		t.Errorf("row %+v (ok %v)", row, ok)
	}
	if most := int64(catalogHeadBytes + catalogTailBytes + 1); f.read > most {
		t.Errorf("read %d bytes of a 1 GiB file, want at most %d", f.read, most)
	}
}

// TestSessionRowOfSmallFile: a file read whole gets its exact count and
// its last name; a blank session_info name clears it, as in pi.
func TestSessionRowOfSmallFile(t *testing.T) {
	content := `{"type":"session","version":3,"id":"s2","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}` + "\n" +
		`{"type":"message","id":"e1","message":{"role":"user","content":[{"type":"image","data":"AA==","mimeType":"image/png"}]}}` + "\n" +
		`{"type":"message","id":"e2","message":{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("é", 100) + `"}]}}` + "\n" +
		`{"type":"session_info","id":"e3","name":"Named"}` + "\n" +
		`{"type":"session_info","id":"e4","name":"  "}` + "\n" +
		`{"type":"message","id":"e5","message":{"role":"assistant","content":[]}}` + "\n" +
		`{"type":"message","id":"e6","mes` // a torn last line
	row, ok := sessionRowOf(strings.NewReader(content), int64(len(content)))
	if !ok || row.MessageCount == nil || *row.MessageCount != 3 || row.Name != nil || row.Summary != strings.Repeat("é", 79)+"…" {
		t.Errorf("row %+v (ok %v)", row, ok)
	}
	for _, notSession := range []string{"", "not json\n", `{"type":"message"}` + "\n", `{"type":"session"}` + "\n"} {
		if row, ok := sessionRowOf(strings.NewReader(notSession), int64(len(notSession))); ok {
			t.Errorf("%q taken as a session: %+v", notSession, row)
		}
	}
}

// TestSessionRowOfHeaderWrittenOtherwise: a header whose version is
// written 3.0 or 3e0 opens (plainWholeNumbers), and so does one after
// blank lines, lines that are no JSON or JSON that JavaScript counts as
// false (pi's loader passes over all of them), or a byte order mark (which
// pi 1.6 does not skip), so each is listed and can be deleted too. A line
// of byte order marks and spaces before the header is blank, as pi's trim
// has it.
func TestSessionRowOfHeaderWrittenOtherwise(t *testing.T) {
	for _, head := range []string{`"version":3.0`, `"version":3e0`, `"version":30e-1`, "\n \r\n\t\n" + `"version":3`,
		"\uFEFF" + `"version":3`, "\uFEFF\n\n" + `"version":3`, "\n\uFEFF\n\uFEFF \uFEFF\n" + `"version":3`,
		"garbage\n{\"torn\nnull\n 0 \r\n-0.0e5\n\"\"\nfalse\n\u00a0{}\n" + `"version":3`} {
		at := strings.LastIndex(head, `"version"`)
		content := head[:at] + `{"type":"session",` + head[at:] + `,"id":"s3","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}` + "\n"
		root := t.TempDir()
		path := filepath.Join(root, "--p--", "s.jsonl")
		os.Mkdir(filepath.Dir(path), 0o755)
		os.WriteFile(path, []byte(content), 0o644)
		if _, err := loadSessionFile(t.Context(), path); err != nil {
			t.Fatal(err)
		}
		if row, ok := sessionRowOf(strings.NewReader(content), int64(len(content))); !ok || row.SessionID != "s3" {
			t.Errorf("%q: row %+v (ok %v)", head, row, ok)
		}
		if err := deleteSession(sessionStore{root: root}, path, ""); err != nil {
			t.Errorf("%q: delete: %v", head, err)
		}
	}
}

// writeSession writes a session file with a header (and makes its folder).
func writeSession(t *testing.T, path string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	header := `{"type":"session","version":3,"id":"` + filepath.Base(path) + `","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}` + "\n"
	if err := os.WriteFile(path, []byte(header), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteSession: a session file of a project folder goes, with its
// loops file; everything else is refused and left as it was, judged
// after symlinks and ".." are resolved.
func TestDeleteSession(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "agent", "sessions")
	store := sessionStore{root: root}
	project := filepath.Join(root, "--p--")
	outside := filepath.Join(base, "elsewhere")
	for _, p := range []string{"a.jsonl", "b.jsonl", "sub/deep.jsonl", "notes.txt"} {
		writeSession(t, filepath.Join(project, p))
	}
	writeSession(t, filepath.Join(root, "loose.jsonl"))
	writeSession(t, filepath.Join(outside, "o.jsonl"))
	os.WriteFile(filepath.Join(project, "a.jsonl.loops.json"), []byte(`{"version":1,"tasks":[]}`), 0o644)
	os.Mkdir(filepath.Join(project, "b.jsonl.loops.json"), 0o755) // not a file: kept
	os.WriteFile(filepath.Join(project, "plain.jsonl"), []byte("no header\n"), 0o644)
	os.Symlink(outside, filepath.Join(root, "--evil--"))
	os.Symlink(filepath.Join(outside, "o.jsonl"), filepath.Join(project, "link.jsonl"))
	alias := filepath.Join(base, "alias")
	os.Symlink(root, alias)
	current := filepath.Join(project, "current.jsonl") // not written yet

	refusals := []struct{ path, want string }{
		{filepath.Join(alias, "--p--", "current.jsonl"), "Cannot delete the current session"},
		{filepath.Join(project, "sub", "deep.jsonl"), "not in a project's folder"},
		{filepath.Join(root, "loose.jsonl"), "not in a project's folder"},
		{filepath.Join(project, "..", "loose.jsonl"), "not in a project's folder"},
		{filepath.Join(root, "--evil--", "o.jsonl"), "not in a project's folder"},
		{filepath.Join(project, "link.jsonl"), "not in a project's folder"},
		{filepath.Join(project, "notes.txt"), "not a session file"},
		{filepath.Join(project, "plain.jsonl"), "not a session file"},
		{filepath.Join(project, "gone.jsonl"), "Session file not found"},
	}
	for _, r := range refusals {
		if err := deleteSession(store, r.path, current); err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("delete %s: %v, want %q", r.path, err, r.want)
		}
	}
	for _, kept := range []string{"--p--/sub/deep.jsonl", "--p--/notes.txt", "--p--/plain.jsonl", "--p--/link.jsonl", "loose.jsonl"} {
		if _, err := os.Lstat(filepath.Join(root, kept)); err != nil {
			t.Errorf("refused, yet %s is gone: %v", kept, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "o.jsonl")); err != nil {
		t.Errorf("a file outside is gone: %v", err)
	}

	if err := deleteSession(store, filepath.Join(alias, "--p--", "a.jsonl"), current); err != nil {
		t.Fatal(err)
	}
	if err := deleteSession(store, filepath.Join(project, "b.jsonl"), ""); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"a.jsonl", "a.jsonl.loops.json", "b.jsonl"} {
		if _, err := os.Lstat(filepath.Join(project, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there (%v)", gone, err)
		}
	}
	if info, err := os.Lstat(filepath.Join(project, "b.jsonl.loops.json")); err != nil || !info.IsDir() {
		t.Errorf("a folder named like a loops file was removed (%v)", err)
	}
}

// TestListSessionsSkipsWhatIsNotASession: symlinks (to a file or a
// folder) are not followed, and a list stops when its context ends.
func TestListSessionsSkipsWhatIsNotASession(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "sessions")
	writeSession(t, filepath.Join(root, "--p--", "a.jsonl"))
	writeSession(t, filepath.Join(base, "elsewhere", "o.jsonl"))
	os.Symlink(filepath.Join(base, "elsewhere", "o.jsonl"), filepath.Join(root, "--p--", "link.jsonl"))
	os.Symlink(filepath.Join(base, "elsewhere"), filepath.Join(root, "--linked--"))
	writeSession(t, filepath.Join(root, "--p--", "bad-\xff.jsonl")) // its path could not be given back
	rows, err := listSessions(context.Background(), sessionStore{root: root}, "")
	if err != nil || len(rows) != 1 || rows[0].SessionID != "a.jsonl" {
		t.Errorf("rows %+v, %v", rows, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := listSessions(ctx, sessionStore{root: root}, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled list: %v", err)
	}
	if rows, err := listSessions(context.Background(), sessionStore{root: filepath.Join(base, "none")}, ""); err != nil || len(rows) != 0 {
		t.Errorf("no sessions folder: %+v, %v", rows, err)
	}
}

// TestDeleteHeldSession: a session file an rpi process holds (the lock a
// session takes when it opens its file: this process's while it switches
// to it, or another rpi's) is not deleted, whatever path names it; once
// let go of, it is. The removal goes through the folders themselves: a
// project folder that is (or, after the check by name, becomes) a symlink
// out of the session directory is not followed.
func TestDeleteHeldSession(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "sessions")
	store := sessionStore{root: root}
	held := filepath.Join(root, "--p--", "held.jsonl")
	writeSession(t, held)
	lock, err := lockSessionFile(context.Background(), held, 0)
	if err != nil || lock == nil {
		t.Fatal(err)
	}
	want := "Cannot delete " + held + ": the session is open in an rpi process (this one or another); close it there first"
	if err := deleteSession(store, held, ""); err == nil || err.Error() != want {
		t.Errorf("delete of a held session: %v, want %q", err, want)
	}
	if _, err := os.Stat(held); err != nil {
		t.Fatalf("the held session is gone: %v", err)
	}
	lock.Close()
	if err := deleteSession(store, held, ""); err != nil {
		t.Errorf("delete once let go of: %v", err)
	}

	outside := filepath.Join(base, "elsewhere")
	writeSession(t, filepath.Join(outside, "o.jsonl"))
	os.Symlink(outside, filepath.Join(root, "--swapped--"))
	if err := removeSessionIn(root, filepath.Join("--swapped--", "o.jsonl")); err == nil {
		t.Error("a session was removed through a symlink out of the session directory")
	}
	if _, err := os.Stat(filepath.Join(outside, "o.jsonl")); err != nil {
		t.Errorf("the file outside is gone: %v", err)
	}
}

// TestSessionRowNameBounded: a row's name is at most catalogNameRunes
// characters, cut with "…" (a 200 KB name came back whole).
func TestSessionRowNameBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	writeSession(t, path)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprintf(f, `{"type":"session_info","id":"i1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","name":"%s"}`+"\n", strings.Repeat("é", 100_000))
	f.Close()
	row, ok := readSessionRow(path)
	if !ok || row.Name == nil || *row.Name != strings.Repeat("é", catalogNameRunes-1)+"…" {
		t.Errorf("row %v, name %+v", ok, row.Name != nil && len(*row.Name) < 1000)
	}
}

// TestSessionRowCwdAndIDBounded: a header's cwd and id went into the row
// whole, up to the 256 KiB a listing reads of a file's head: a folder of
// such files made the rows rpi keeps (and each session_list answer) 256
// KiB a file. Now a row keeps at most catalogCwdRunes of the cwd (no
// working directory's path is longer: Linux's PATH_MAX is 4096 bytes)
// and catalogIDRunes of the id (pi's are 36 characters, rpi's at most
// maxSessionIDLength), a longer one cut with "…" as a long name is: it
// names no directory, nor any id a client could give.
func TestSessionRowCwdAndIDBounded(t *testing.T) {
	long := "/" + strings.Repeat("d", 150_000)
	id := strings.Repeat("7", 90_000)
	path := filepath.Join(t.TempDir(), "s.jsonl")
	header := `{"type":"session","version":3,"id":"` + id + `","timestamp":"2026-01-01T00:00:00.000Z","cwd":"` + long + `"}` + "\n"
	os.WriteFile(path, []byte(header), 0o644)
	row, ok := readSessionRow(path)
	if !ok || row.Cwd != long[:catalogCwdRunes-1]+"…" || row.SessionID != id[:catalogIDRunes-1]+"…" {
		t.Errorf("row %v: cwd of %d bytes, id of %d", ok, len(row.Cwd), len(row.SessionID))
	}
	if kept := row.keptBytes(); kept > 16<<10 {
		t.Errorf("the row is counted as %d bytes", kept)
	}
	// One of an ordinary length is kept whole.
	exact := "/" + strings.Repeat("d", catalogCwdRunes-1)
	os.WriteFile(path, []byte(`{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"`+exact+`"}`+"\n"), 0o644)
	if row, ok := readSessionRow(path); !ok || row.Cwd != exact || row.SessionID != "s" {
		t.Errorf("row %v: cwd of %d bytes", ok, len(row.Cwd))
	}
}

// TestDeleteSessionHeaderCutByTheHead: session_delete reads at most
// catalogHeadBytes of a file, and a line that limit cuts is no whole line:
// a file whose line there is a header followed by more (no JSON, so no
// header for the loader, and no session at all) is refused, as the loader
// and the session list refuse it, not deleted; a header that ends with
// the file at that limit is one.
func TestDeleteSessionHeaderCutByTheHead(t *testing.T) {
	header := `{"type":"session","version":3,"id":"cut","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}`
	for _, tt := range []struct {
		padding, after string
		session        bool
	}{
		{"garbage", "garbage after the cut\n", false},
		{"", " garbage after the cut\n", false}, // no line passed over: the header's own line runs on
		{"garbage", "", true},
	} {
		root := t.TempDir()
		path := filepath.Join(root, "--p--", "s.jsonl")
		os.Mkdir(filepath.Dir(path), 0o755)
		pad, header := "", header
		if tt.padding != "" {
			pad = tt.padding + strings.Repeat(" ", catalogHeadBytes-len(header)-len(tt.padding)-1) + "\n"
		} else {
			header += strings.Repeat(" ", catalogHeadBytes-len(header))
		}
		content := pad + header + tt.after
		if len(pad+header) != catalogHeadBytes {
			t.Fatalf("the header ends at %d", len(pad+header))
		}
		os.WriteFile(path, []byte(content), 0o644)
		_, loadErr := loadSessionFile(t.Context(), path)
		_, listed := sessionRowOf(strings.NewReader(content), int64(len(content)))
		if (loadErr == nil) != tt.session || listed != tt.session {
			t.Fatalf("%q: loaded %v, listed %v", tt.after, loadErr, listed)
		}
		err := deleteSession(sessionStore{root: root}, path, "")
		_, statErr := os.Stat(path)
		if tt.session != (err == nil) || tt.session != errors.Is(statErr, os.ErrNotExist) {
			t.Errorf("%q: delete: %v (the file: %v)", tt.after, err, statErr)
		}
	}
}

// TestFindSessionByID: --session ID takes the cwd's session with that id
// over one whose id only starts with it, even a later one; among those
// whose id starts with it, the one written last, as pi 1.6 (which sorts
// on the last message's time, the same for files written as they grow);
// another project's only when the cwd has none, as an error naming it.
// listSessions' first row, what --continue opens, is the one written
// last.
func TestFindSessionByID(t *testing.T) {
	agentDir := t.TempDir()
	store := sessionStore{root: filepath.Join(agentDir, "sessions")}
	cwd := "/p"
	here := defaultSessionDir(agentDir, cwd)
	write := func(path, id, cwd string, age time.Duration) {
		os.MkdirAll(filepath.Dir(path), 0o755)
		header := `{"type":"session","version":3,"id":"` + id + `","timestamp":"2026-01-01T00:00:00.000Z","cwd":"` + cwd + `"}` + "\n"
		if err := os.WriteFile(path, []byte(header), 0o644); err != nil {
			t.Fatal(err)
		}
		when := time.Now().Add(-age)
		if err := os.Chtimes(path, when, when); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(here, "old.jsonl"), "abc", cwd, 3*time.Hour)
	write(filepath.Join(here, "new.jsonl"), "abcd", cwd, time.Hour)
	write(filepath.Join(here, "mid.jsonl"), "abce", cwd, 2*time.Hour)
	write(filepath.Join(agentDir, "sessions", "--q--", "q.jsonl"), "qrs", "/q", 0)
	for _, c := range []struct{ arg, want, err string }{
		{"abc", "old.jsonl", ""},  // the exact id, not the later abcd
		{"ab", "new.jsonl", ""},   // three start with ab: the one written last
		{"abce", "mid.jsonl", ""}, // exact
		{"q", "", "Session found in different project: /q (rpc mode cannot ask whether to fork it into the current one: --fork " + filepath.Join(agentDir, "sessions", "--q--", "q.jsonl") + " does)"},
		{"x", "", "No session found matching 'x'"},
	} {
		path, err := findSessionByID(context.Background(), store, c.arg, cwd)
		if errorText(err) != c.err || c.want != "" && path != filepath.Join(here, c.want) {
			t.Errorf("%q: %s, %v; want %s, %s", c.arg, path, err, c.want, c.err)
		}
	}
	rows, err := listSessions(context.Background(), store, cwd)
	if err != nil || len(rows) != 3 || rows[0].Path != filepath.Join(here, "new.jsonl") {
		t.Errorf("the cwd's sessions, newest first: %+v, %v", rows, err)
	}
}

// TestListSessionsReadsAChangedFileAgain: a listing keeps the rows it
// read and reads a file again only when it changed; each change it must
// notice, alone: the file grew (its modification time put back), its
// modification time moved (its size the same), or another file of the
// same size and time was renamed over it.
func TestListSessionsReadsAChangedFileAgain(t *testing.T) {
	agentDir, cwd := t.TempDir(), t.TempDir()
	store := sessionStore{root: filepath.Join(agentDir, "sessions")}
	path := writeTestSession(t, agentDir, cwd, "0199aaaa-0000-7000-8000-000000000001", 1, "first title")
	summary := func() string {
		t.Helper()
		rows, err := listSessions(context.Background(), store, cwd)
		if err != nil || len(rows) != 1 {
			t.Fatalf("rows %+v, %v", rows, err)
		}
		return rows[0].Summary
	}
	if got := summary(); got != "first title" {
		t.Fatalf("summary %q", got)
	}
	info, _ := os.Stat(path)
	rewrite := func(from, to string) { // in place: same file, same size
		t.Helper()
		data, _ := os.ReadFile(path)
		if err := os.WriteFile(path, []byte(strings.Replace(string(data), from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	rewrite("first title", "other title")
	os.Chtimes(path, info.ModTime().Add(time.Second), info.ModTime().Add(time.Second))
	if got := summary(); got != "other title" {
		t.Errorf("after its time moved: %q", got)
	}

	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"type":"session_info","id":"e0000002","parentId":"e0000001","timestamp":"2025-01-01T00:02:00.000Z","name":"renamed"}` + "\n")
	f.Close()
	os.Chtimes(path, info.ModTime().Add(time.Second), info.ModTime().Add(time.Second))
	rows, _ := listSessions(context.Background(), store, cwd)
	if len(rows) != 1 || rows[0].Name == nil || *rows[0].Name != "renamed" {
		t.Errorf("after it grew: %+v", rows)
	}

	now, _ := os.Stat(path)
	data, _ := os.ReadFile(path)
	other := path + ".new"
	os.WriteFile(other, []byte(strings.Replace(string(data), "other title", "third title", 1)), 0o644)
	os.Chtimes(other, now.ModTime(), now.ModTime())
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if got := summary(); got != "third title" {
		t.Errorf("after another file took its place: %q", got)
	}
}

// FuzzCatalogEntry: the catalog's reading of a session line agrees with
// encoding/json's, keys matched exactly (unmarshalExact), on any line: whether it is taken, and what it gives
// (the message's bytes as the decoder keeps them: invalid UTF-8 made
// U+FFFD).
func FuzzCatalogEntry(f *testing.F) {
	for _, seed := range []string{
		`{"type":"message","id":"a","message":{"role":"user","content":"hi"}}`,
		`{"type":"session_info","name":"x"}` + "\n",
		` { "type" : "session_info" , "name" : null } `,
		`{"type":"session_info","name":"\u00e9\ud800"}`,
		`{"Type":"message"}`,
		`{"type":"message","Type":"session_info","name":"n","NAME":"m"}`,
		`{"\u0054ype":"message","meſſage":{"a":1},"type":"session_info"}`,
		`{"type":"a","type":"b"}`,
		`{"type":5}`,
		`{"t\u0079pe":"message"}`,
		`{"message":"\xff"}`,
		`[]`,
		`{"type":"message"} x`,
		`{"name":{"a":1}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var d jsonIn
		var got catalogEntry
		ok := readCatalogEntry(line, &d, &got)
		var want catalogEntry
		wantOK := unmarshalExact(line, &want) == nil
		if ok != wantOK {
			t.Fatalf("%q: taken %v, encoding/json %v", line, ok, wantOK)
		}
		if !ok {
			return
		}
		want.Message, _ = validRaw(want.Message)
		if got.Type != want.Type || (got.Name == nil) != (want.Name == nil) || got.Name != nil && *got.Name != *want.Name ||
			!bytes.Equal(got.Message, want.Message) {
			t.Fatalf("%q: read %+v, encoding/json %+v", line, got, want)
		}
		// Keys are matched exactly, as JSON.parse matches them.
		var typ string
		if v, ok := exactMember(line, "type"); ok && v[0] == '"' && utf8.Valid(v) && unquote(v, &typ) && typ != got.Type {
			t.Fatalf("%q: type read as %q, but the line's type is %q", line, got.Type, typ)
		}
	})
}

// TestConcurrentSessionListsShareAScan: a client that sends many
// session_list (or ACP session/list) requests at once made rpi read the
// whole sessions folder once for each, all at the same time. Now the
// listings of one folder share one scan: one that comes while a scan
// runs waits for the next, which starts once that one ends (so it sees
// the folder as it was when the listing came, or later), and that next
// scan answers every listing that came meanwhile. The first scan is held
// once it has read the folder until the others have all come (before,
// until a second scan read it beside it); a session written then is in
// their answers, not in the first's.
func TestConcurrentSessionListsShareAScan(t *testing.T) {
	agentDir, cwd := t.TempDir(), t.TempDir()
	store := sessionStore{root: filepath.Join(agentDir, "sessions")}
	const sessions, lists = 200, 64
	for i := range sessions {
		writeTestSession(t, agentDir, cwd, fmt.Sprintf("0199aaaa-0000-7000-8000-%012d", i), i%60, "title")
	}
	folder := defaultSessionDir(agentDir, cwd)
	var mu sync.Mutex
	scans, joined, overlapped := 0, 0, 0
	firstRead, release := make(chan struct{}), make(chan struct{})
	let := sync.OnceFunc(func() { close(release) })
	ours := func(dirs []string) bool { return len(dirs) == 1 && dirs[0] == folder }
	listScanRead = func(dirs []string) {
		if !ours(dirs) {
			return
		}
		mu.Lock()
		scans++
		first := scans == 1
		if !first {
			select {
			case <-release:
			default:
				overlapped++ // the first is still held: two scans at once
				let()
			}
		}
		mu.Unlock()
		if first {
			close(firstRead)
			<-release
		}
	}
	listScanJoined = func(dirs []string) {
		if !ours(dirs) {
			return
		}
		mu.Lock()
		if joined++; joined == lists-1 {
			let()
		}
		mu.Unlock()
	}
	t.Cleanup(func() { listScanRead, listScanJoined = nil, nil })
	answers := make([][]sessionRow, lists)
	errs := make([]error, lists)
	var wg sync.WaitGroup
	wg.Go(func() { answers[0], errs[0] = listSessions(context.Background(), store, cwd) })
	<-firstRead
	writeTestSession(t, agentDir, cwd, "0199aaaa-0000-7000-8000-999999999999", 59, "written during the first scan")
	for i := 1; i < lists; i++ {
		wg.Go(func() { answers[i], errs[i] = listSessions(context.Background(), store, cwd) })
	}
	wg.Wait()
	if overlapped > 0 || scans != 2 {
		t.Errorf("%d listings at once made %d scans of the folder, %d of them beside another; want 2 (the first, and one for the others), none at once", lists, scans, overlapped)
	}
	for i, rows := range answers {
		want := sessions + 1
		if i == 0 {
			want = sessions
		}
		if errs[i] != nil || len(rows) != want {
			t.Fatalf("listing %d: %d rows, %v; want %d", i, len(rows), errs[i], want)
		}
		for k := 1; k < len(rows); k++ {
			if rows[k].modified > rows[k-1].modified || rows[k].SessionID == "" || rows[k].Cwd != cwd {
				t.Fatalf("listing %d, row %d: %+v after %+v", i, k, rows[k], rows[k-1])
			}
		}
	}
	// Each listing has rows of its own: marking one's (rpi serve's live
	// sessions) leaves the others' as they are.
	answers[1][0].Live = true
	if answers[2][0].Live {
		t.Error("two listings share their rows")
	}
}

// TestSharedScanPanicFreesTheFolder: a scan that panics (a bug, which
// the command's own recover turns into an error) leaves its folder free:
// the next listing runs a scan of its own, where it waited forever for
// the one that never ended.
func TestSharedScanPanicFreesTheFolder(t *testing.T) {
	var s sharedScans
	key := scanKey{folder: "f"}
	func() {
		defer func() {
			if p := recover(); p != "scan" {
				t.Errorf("panic %v, want the scan's", p)
			}
		}()
		s.share(context.Background(), key, func(context.Context) ([]sessionRow, error) { panic("scan") })
	}()
	s.mu.Lock()
	left := len(s.scans)
	s.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d folders still scanned after the panic; the next listing waits forever", left)
	}
	rows, err := s.share(context.Background(), key, func(context.Context) ([]sessionRow, error) {
		return []sessionRow{{SessionID: "a"}}, nil
	})
	if err != nil || len(rows) != 1 || rows[0].SessionID != "a" {
		t.Fatalf("next listing: %v, %v", rows, err)
	}
}
