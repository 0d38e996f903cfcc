package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEditDetailsRedactKeys: an edit's diff and patch, which go to the
// client and the session file, have the keys rpi holds taken out as its
// text does: a context line of .env that holds one shows [redacted].
func TestEditDetailsRedactKeys(t *testing.T) {
	const key = "sk-secret-key-0123456789"
	s := toolServer(t, map[string]string{".env": "OPENAI_API_KEY=" + key + "\nDEBUG=0\n"})
	s.set.secrets.add(key)
	res, isError := s.runTool(context.Background(), contentBlock{Type: "toolCall", ID: "c", Name: "edit",
		Arguments: json.RawMessage(`{"path":".env","edits":[{"oldText":"DEBUG=0","newText":"DEBUG=1"}]}`)})
	details, _ := json.Marshal(res.Details)
	if isError || strings.Contains(string(details), key) || !strings.Contains(string(details), "OPENAI_API_KEY=[redacted]") {
		t.Errorf("edit's details (isError %v): %s", isError, details)
	}
}

// TestGrepSkipsSymlinksInTheTree: grep over a folder passes over the
// symlinks in it, as pi's ripgrep does without --follow: a project's
// link to a file outside it (notes.txt → ~/.aws/credentials) is not
// searched, nor is one to a file inside, which is found under its own
// name. A symlink given as the path is still searched
// (TestSearchOfASymlinkedFileNamesIt).
func TestGrepSkipsSymlinksInTheTree(t *testing.T) {
	s := toolServer(t, map[string]string{"sub/b.txt": "needle\n"})
	outside := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(outside, []byte("needle secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"notes.txt": outside, "again.txt": "sub/b.txt"} {
		if err := os.Symlink(target, filepath.Join(s.set.cwd, link)); err != nil {
			t.Fatal(err)
		}
	}
	if got, isError := callTool(t, s, "grep", `{"pattern":"needle"}`); got != "sub/b.txt:1: needle" || isError {
		t.Errorf("grep over the tree: got %q (isError %v)", got, isError)
	}
	if got, isError := callTool(t, s, "grep", `{"pattern":"needle","path":"notes.txt"}`); got != "notes.txt:1: needle secret" || isError {
		t.Errorf("grep of the symlink itself: got %q (isError %v)", got, isError)
	}
}

// TestFindDropsLeadingDotSlash: a find pattern that starts with ./ is
// taken from the searched folder, as pi 1.6 takes it (it drops the ./):
// "./src/*.go" found nothing, "./*.go" nothing either.
func TestFindDropsLeadingDotSlash(t *testing.T) {
	s := toolServer(t, map[string]string{"src/a.go": "", "b.go": "", "src/deep/c.go": ""})
	for pattern, want := range map[string]string{
		"./src/*.go":    "src/a.go",
		"././src/**":    "src/a.go\nsrc/deep/\nsrc/deep/c.go",
		"./*.go":        "b.go\nsrc/a.go\nsrc/deep/c.go",
		"src/./a.go":    "No files found matching pattern",
		".//src/a.go":   "No files found matching pattern",
		"./src/deep/c*": "src/deep/c.go",
	} {
		if got, isError := callTool(t, s, "find", `{"pattern":"`+pattern+`"}`); got != want || isError {
			t.Errorf("find %q: got %q (isError %v), want %q", pattern, got, isError, want)
		}
	}
}

// TestFindSmartCase: a find pattern all in lower case matches names of
// either case, as pi 1.6's fd does (its smart case); one with an upper
// case letter matches case exactly.
func TestFindSmartCase(t *testing.T) {
	s := toolServer(t, map[string]string{"README.md": "", "src/Main.go": "", "notes.MD": ""})
	for pattern, want := range map[string]string{
		"readme*":     "README.md",
		"*.md":        "README.md\nnotes.MD",
		"src/main.go": "src/Main.go",
		"Readme*":     "No files found matching pattern",
		"*.MD":        "notes.MD",
		"src/Main.go": "src/Main.go",
	} {
		if got, isError := callTool(t, s, "find", `{"pattern":"`+pattern+`"}`); got != want || isError {
			t.Errorf("find %q: got %q (isError %v), want %q", pattern, got, isError, want)
		}
	}
}

// TestWriteThroughADanglingSymlinkWithDots: a dangling symlink whose
// target climbs out of a symlinked folder (link → sub/../new.txt, sub →
// elsewhere/deep) is followed as the system follows it (to
// elsewhere/new.txt), as pi's write follows it: it was taken word by word,
// the file made beside the link, and the link left dangling after a write
// that said it succeeded.
func TestWriteThroughADanglingSymlinkWithDots(t *testing.T) {
	s := toolServer(t, nil)
	elsewhere := t.TempDir()
	if err := os.Mkdir(filepath.Join(elsewhere, "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(s.set.cwd, "notes.md")
	if err := os.Symlink(filepath.Join(elsewhere, "deep"), filepath.Join(s.set.cwd, "sub")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/../new.txt", link); err != nil {
		t.Fatal(err)
	}
	call, err := s.decodeToolCall("write", json.RawMessage(`{"path":"notes.md","content":"written\n"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := call.(preparer).prepare(context.Background(), s.session); err != nil {
		t.Fatal(err)
	}
	_, message := call.describe()
	call.(preparer).release()
	if want := "notes.md → " + filepath.Join(elsewhere, "new.txt") + " (outside the working directory)"; !strings.Contains(message, want) {
		t.Errorf("the dialog: %q, want it to name %q", message, want)
	}
	if got, isError := callTool(t, s, "write", `{"path":"notes.md","content":"written\n"}`); isError {
		t.Fatalf("write: %s", got)
	}
	if data, err := os.ReadFile(link); string(data) != "written\n" {
		t.Errorf("the link leads to %q (%v), want what was written", data, err)
	}
	if _, err := os.Lstat(filepath.Join(s.set.cwd, "new.txt")); err == nil {
		t.Errorf("new.txt was made beside the link")
	}
}

// TestGrepShowsCRLFLinesWithoutTheirCR: grep shows a line of a CRLF
// file without its CR, as pi 1.6 strips the line end; every line of such
// a file ended in \r (a terminal client drew it over its own start).
func TestGrepShowsCRLFLinesWithoutTheirCR(t *testing.T) {
	s := toolServer(t, map[string]string{"crlf.txt": "one needle\r\ntwo\r\nthree needle\r", "inner.txt": "a\rneedle\n"})
	for _, tt := range []struct{ args, want string }{
		{`{"pattern":"needle","path":"crlf.txt","context":1}`, "crlf.txt:1: one needle\ncrlf.txt-2- two\ncrlf.txt:3: three needle"},
		{`{"pattern":"needle","path":"crlf.txt"}`, "crlf.txt:1: one needle\ncrlf.txt:3: three needle"},
		{`{"pattern":"ne+dle","path":"crlf.txt"}`, "crlf.txt:1: one needle\ncrlf.txt:3: three needle"},
		{`{"pattern":"needle","path":"inner.txt"}`, "inner.txt:1: a\rneedle"}, // a CR inside a line is its text
	} {
		if got, isError := callTool(t, s, "grep", tt.args); got != tt.want || isError {
			t.Errorf("grep %s: got %q (isError %v), want %q", tt.args, got, isError, tt.want)
		}
	}
}

// TestGrepCutsLongLinesByCharacters: grep cuts a line longer than 500
// characters (UTF-16 units, as pi 1.6 counts them) at a character's
// start, and then says so as pi does; it cut at 500 bytes, inside a
// character (its bytes went out as U+FFFD) and a line of 300 CJK
// characters, which pi shows whole, was cut.
func TestGrepCutsLongLinesByCharacters(t *testing.T) {
	s := toolServer(t, map[string]string{
		"cjk.txt":   strings.Repeat("日", 300) + "needle\n",
		"long.txt":  strings.Repeat("日", 600) + "needle\n",
		"emoji.txt": "x" + strings.Repeat("😀", 300) + "needle\n",
	})
	const notice = "\n\n[Some lines truncated to 500 chars. Use read tool to see full lines]"
	for _, tt := range []struct{ path, want string }{
		{"cjk.txt", "cjk.txt:1: " + strings.Repeat("日", 300) + "needle"},
		{"long.txt", "long.txt:1: " + strings.Repeat("日", 500) + "... [truncated]" + notice},
		{"emoji.txt", "emoji.txt:1: x" + strings.Repeat("😀", 249) + "... [truncated]" + notice}, // the 250th would end past 500 units
	} {
		if got, isError := callTool(t, s, "grep", `{"pattern":"needle","path":"`+tt.path+`"}`); got != tt.want || isError {
			t.Errorf("grep in %s: got %q (isError %v), want %q", tt.path, got, isError, tt.want)
		}
	}
}

// TestToolIgnoresBounded: grep and find follow at most maxToolIgnoreRules
// rules of the .gitignore files they read (the walk's root's and those
// above it in its repository), none longer than maxIgnoreRuleBytes, and
// say so when rules were left: a project's .gitignore of 1 MiB of short
// rules was read whole by every call, 140,000 regexps and 216 MiB each
// time, and once more for each folder above the root that held one.
func TestToolIgnoresBounded(t *testing.T) {
	var b strings.Builder
	for i := range maxToolIgnoreRules + 10 {
		fmt.Fprintf(&b, "nothing%d\n", i)
	}
	b.WriteString("secret.txt\n")
	s := toolServer(t, map[string]string{".gitignore": b.String(), "secret.txt": "key", "kept.txt": "key"})
	if rules, cut := loadIgnores(s.set.cwd); len(rules) > maxToolIgnoreRules || !cut {
		t.Errorf("%d rules read (cut %v), want at most %d", len(rules), cut, maxToolIgnoreRules)
	}
	note := fmt.Sprintf("[Rules of .gitignore files past the first %d, longer than %d bytes, or past %s of them were not followed]",
		maxToolIgnoreRules, maxIgnoreRuleBytes, formatSize(maxIgnoreBytes))
	for tool, args := range map[string]string{"find": `{"pattern":"*.txt"}`, "grep": `{"pattern":"key"}`} {
		got, _ := callTool(t, s, tool, args)
		if !strings.Contains(got, "secret.txt") || !strings.HasSuffix(got, "\n\n"+note) {
			t.Errorf("%s: %q, want secret.txt found and the note", tool, got)
		}
	}
	os.WriteFile(filepath.Join(s.set.cwd, ".gitignore"), []byte("secret.txt\n"+strings.Repeat("x", maxIgnoreRuleBytes+1)+"\n"), 0o644)
	if got, _ := callTool(t, s, "find", `{"pattern":"*.txt"}`); got != "kept.txt\n\n"+note {
		t.Errorf("find with a long rule: %q", got)
	}
	os.WriteFile(filepath.Join(s.set.cwd, ".gitignore"), []byte("secret.txt\n"), 0o644)
	if got, _ := callTool(t, s, "find", `{"pattern":"*.txt"}`); got != "kept.txt" {
		t.Errorf("find with a short .gitignore: %q", got)
	}
}

// TestProcessSpecTakesWholeNumbersAnyhow: the process tool's spec takes
// a whole number however JSON writes it, as the tool's other fields do
// (its schema says integer, and 5e3 is one): "timeoutMs": 5e3 was
// refused as a spec that "must be an object".
func TestProcessSpecTakesWholeNumbersAnyhow(t *testing.T) {
	s := toolServer(t, nil)
	got, isError := callTool(t, s, "process", `{"action":"spawn","spec":{"argv":["true"],"timeoutMs":5e3,"outputBytes":4096.0}}`)
	if isError || !strings.Contains(got, `"state"`) {
		t.Fatalf("spawn with timeoutMs 5e3: got %q (isError %v)", got, isError)
	}
	var info processInfo
	if err := json.Unmarshal([]byte(got), &info); err != nil {
		t.Fatalf("spawn's answer %q: %v", got, err)
	}
	if got, isError := callTool(t, s, "process", `{"action":"wait","processId":"`+info.ID+`"}`); isError || !strings.Contains(got, `"exitCode":0`) {
		t.Errorf("wait: got %q (isError %v)", got, isError)
	}
}

// TestLargestIntegerTaken: a field that takes an int takes the largest
// one, written out ("limit": 9223372036854775807, a model's "no limit"):
// it was refused as "must be at most 9223372036854775807", itself.
func TestLargestIntegerTaken(t *testing.T) {
	s := toolServer(t, map[string]string{"a.txt": "one\ntwo\n"})
	big := strconv.Itoa(math.MaxInt)
	for _, c := range [][3]string{
		{"read", `{"path":"a.txt","limit":` + big + `}`, "one\ntwo\n"},
		{"ls", `{"limit":` + big + `}`, "a.txt"},
		{"grep", `{"pattern":"two","limit":` + big + `}`, "a.txt:2: two"},
	} {
		if got, isError := callTool(t, s, c[0], c[1]); got != c[2] || isError {
			t.Errorf("%s %s: got %q (isError %v), want %q", c[0], c[1], got, isError, c[2])
		}
	}
	// One past it is still refused, as such.
	if got, _ := callTool(t, s, "ls", `{"limit":9223372036854775808}`); !strings.Contains(got, `field "limit" must be at most `+big) {
		t.Errorf("ls with a limit past an int: got %q", got)
	}
}
