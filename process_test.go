package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestCutTail(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		maxLines int
		maxBytes int
		want     string
	}{
		{"under both limits", "a\nb\n", 5, 100, "a\nb\n"},
		{"line limit", "1\n2\n3\n4\n", 2, 100, "3\n4\n"},
		{"line limit, no final newline", "1\n2\n3", 2, 100, "2\n3"},
		{"byte limit keeps whole lines", "aaaa\nbbbb\ncc\n", 10, 7, "cc\n"},
		{"byte limit exact", "aaaa\nbbbb\n", 10, 10, "aaaa\nbbbb\n"},
		{"last line alone too long keeps its end", "x\n0123456789", 10, 4, "6789"},
		{"cut never splits a character", "x\nééé", 10, 5, "éé"},
	}
	for _, tt := range tests {
		if got := string(cutTail([]byte(tt.in), tt.maxLines, tt.maxBytes)); got != tt.want {
			t.Errorf("%s: cutTail(%q, %d, %d) = %q, want %q", tt.name, tt.in, tt.maxLines, tt.maxBytes, got, tt.want)
		}
	}
}

func TestUTF8Stream(t *testing.T) {
	var u utf8Stream
	euro := "€" // three bytes
	var got []string
	got = append(got, u.next([]byte("a"+euro[:1])))
	got = append(got, u.next([]byte(euro[1:2])))
	got = append(got, u.next([]byte(euro[2:]+"b")))
	got = append(got, u.next([]byte{0xff, 'c'}))
	got = append(got, u.next([]byte{0xe2}))
	got = append(got, u.flush())
	want := []string{"a", "", euro + "b", "\xffc", "", "\xe2"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("chunk %d = %q, want %q", i, got[i], want[i])
		}
	}
}

// TestBashFullOutput checks that a truncated bash answer names a temp file
// holding the whole output, interleaved as it came, and that rpi removes
// the file when it exits.
func TestBashFullOutput(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	pr, pw := io.Pipe()
	out := newWatchedOutput()
	done := make(chan struct{})
	go func() {
		serveInProcess(t, []string{"rpc", "--cwd", t.TempDir()}, pr, out, 0)
		close(done)
	}()
	io.WriteString(pw, `{"id":"big","type":"bash","command":"for i in $(seq 1 30000); do echo line$i; done; echo tail >&2"}`+"\n")
	if !out.waitFor(`"id":"big"`, func(b []byte) string { return string(b) }) {
		t.Fatal("no answer")
	}
	var res struct {
		Data bashResult
	}
	lines := bytes.Split(bytes.TrimSpace(out.bytes()), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], &res); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(res.Data.FullOutputPath)
	if err != nil {
		t.Fatal(err)
	}
	// stdout and stderr are separate pipes, so "tail" may arrive before the
	// last stdout chunk; each stream's own order is kept.
	if !res.Data.Truncated || !strings.HasPrefix(string(full), "line1\nline2\n") ||
		!strings.Contains(string(full), "line29999\nline30000\n") || !strings.Contains(string(full), "tail\n") ||
		len(full) != len("tail\n")+int(linesBytes(30000)) {
		t.Errorf("truncated %v; full output %d bytes, starting %q", res.Data.Truncated, len(full), full[:20])
	}
	if len(res.Data.Output) > maxOutputBytes || !strings.Contains(res.Data.Output, "line30000\n") {
		t.Errorf("output is %d bytes ending %q: want the tail within %d bytes", len(res.Data.Output), res.Data.Output[len(res.Data.Output)-20:], maxOutputBytes)
	}
	if res.Data.Stderr != "tail\n" || strings.Count(res.Data.Stdout, "\n") != maxOutputLines || !strings.HasSuffix(res.Data.Stdout, "line30000\n") {
		t.Errorf("stderr %q, stdout %d lines", res.Data.Stderr, strings.Count(res.Data.Stdout, "\n"))
	}
	pw.Close()
	<-done
	if _, err := os.Stat(res.Data.FullOutputPath); !os.IsNotExist(err) {
		t.Errorf("full output file still there after exit: %v", err)
	}
}

// linesBytes is the size of "line1\n" … "lineN\n".
func linesBytes(n int) int64 {
	var total int64
	for i := 1; i <= n; i++ {
		total += int64(len("line\n") + len(strconv.Itoa(i)))
	}
	return total
}
