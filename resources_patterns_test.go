package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMinimatch: settings.json's globs match as minimatch's defaults do.
func TestMinimatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"old*", "old-a", true},
		{"old*", "team/old-a", false}, // * stays within a part
		{"team/*", "team/old-a", true},
		{"**/draft*", "prompts/draft.md", true},
		{"**/draft*", "draft.md", true},    // ** matches no part too
		{"**/x", ".pi/skills/x", false},    // nor a hidden one
		{".pi/**/x", ".pi/skills/x", true}, // a part starting with a dot, named
		{"*.md", ".hidden.md", false},      // * does not match a leading dot
		{".*.md", ".hidden.md", true},      // a pattern's dot does
		{"a?c", "abc", true},               // ? is one character
		{"a?c", "a/c", false},              // never a /
		{"[a-c]x", "bx", true},             // classes
		{"[!a-c]x", "bx", false},           // negated with !
		{"[^a-c]x", "dx", true},            // or ^
		{"[[:digit:]]x", "7x", true},       // POSIX's classes
		{"{old,new}-*", "new-tool", true},  // braces
		{"v{1..3}", "v2", true},            // ranges
		{"v{1..3}", "v4", false},           //
		{"{a}", "{a}", true},               // a set without a comma is literal
		{"\\*", "*", true},                 // \ escapes
		{"\\*", "x", false},                //
		{"#x", "#x", false},                // a comment matches nothing
		{"!old*", "new", true},             // a leading ! negates
		{"/abs/*/SKILL.md", "/abs/p/SKILL.md", true},
		{"[z-a]", "m", false}, // a range backwards is empty
		{"[abc", "[abc", true},
		{"a/**", "a", false},    // a last ** takes a part at least
		{"a/**", "a/", true},    //
		{"a/**/**", "a", false}, //
		{"a/**/b", "a/b", true}, // one in the middle none // a [ without its ] is itself
	} {
		if got := minimatch(tc.pattern, tc.path); got != tc.want {
			t.Errorf("minimatch(%q, %q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
}

// TestResourcePatternsOrder: includes, then !, then +, then -, as pi's
// applyPatterns; + and - name files exactly, never by their name alone.
func TestResourcePatternsOrder(t *testing.T) {
	base := filepath.FromSlash("/agent")
	files := []string{"/agent/t/a/SKILL.md", "/agent/t/b/SKILL.md", "/agent/t/c.md", "/agent/t/d.md"}
	for i := range files {
		files[i] = filepath.FromSlash(files[i])
	}
	for _, tc := range []struct {
		entries []string
		want    string
	}{
		{nil, "1111"},
		{[]string{"t/*"}, "1111"},                  // t/a and t/b by their folders
		{[]string{"!t/*"}, "0000"},                 // folders too
		{[]string{"!a", "+t/a"}, "1111"},           // + takes back
		{[]string{"!a", "+a"}, "0111"},             // not by name
		{[]string{"+t/a", "-t/a"}, "0111"},         // - wins
		{[]string{"-t/c.md", "-./t/d.md"}, "1100"}, // a leading ./
		{[]string{"-/agent/t/b"}, "1011"},          // a whole path
		{[]string{"*.md", "!c*"}, "1101"},          // SKILL.md matches *.md by name
	} {
		_, p := splitResourceEntries(tc.entries, "")
		var got strings.Builder
		for _, on := range p.apply(files, base) {
			got.WriteString(map[bool]string{true: "1", false: "0"}[on])
		}
		if got.String() != tc.want {
			t.Errorf("%q: got %s, want %s", tc.entries, got.String(), tc.want)
		}
	}
}

// TestSkillIgnoreRules: ignore files read as pi reads them with
// node-ignore (its folder in front of each rule, the last match deciding,
// any case).
func TestSkillIgnoreRules(t *testing.T) {
	for _, tc := range []struct {
		rel, lines string // the folder of the ignore file, its text
		path       string
		dir, want  bool
	}{
		{"", "*.md", "a/b/x.md", false, true},            // no /: any depth
		{"sub", "*.md", "sub/x.md", false, true},         // below sub/: sub/*.md
		{"sub", "*.md", "sub/deeper/x.md", false, false}, // anchored by pi's prefix
		{"", "/top.md", "a/top.md", false, true},         // pi drops the / before the prefix
		{"", "a/b", "x/a/b", false, false},               // a / inside anchors
		{"", "a/b", "a/b", false, true},                  //
		{"", "wip/", "wip", false, false},                // a folder only
		{"", "wip/", "wip", true, true},                  //
		{"", "WIP", "wip", true, true},                   // any case
		{"", "*\n!keep.md", "keep.md", false, false},     // the last match decides
		{"", "!keep.md\n*", "keep.md", false, true},      //
		{"", "**/x", "a/b/x", false, true},               // leading **/
		{"", "a/**/x", "a/x", false, true},               // /**/: no folder or some
		{"", "a/**/x", "a/b/c/x", false, true},           //
		{"", "a/**", "a/b/c", false, true},               // trailing /**: anything below
		{"", "a/**", "a", true, false},                   // not a itself
		{"sub", "*", "sub/x", false, true},               // sub/* needs a name
		{"", "x?.md", "xy.md", false, true},              //
		{"", "[a-c].md", "b.md", false, true},            //
		{"", "[!a-c].md", "b.md", false, false},          //
		{"", "[abc", "a", false, false},                  // a [ without ] never matches
		{"", "a\\", "a", false, false},                   // a lone trailing \: no rule
		{"", "a\\ ", "a ", false, true},                  // an escaped trailing space stays
		{"", "a  ", "a", false, true},                    // others go
		{"", "# c\n\n   ", "# c", false, false},          // comments, blank lines
		{"", "\\#c", "#c", false, true},                  // \# is a #
		{"", "!", "x", false, false},                     // a lone ! takes all back
		{"", "x\r", "x", false, true},                    // CRLF
	} {
		dir := t.TempDir()
		if tc.rel != "" {
			dir = filepath.Join(dir, filepath.FromSlash(tc.rel))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(tc.lines), 0o644); err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(dir)
		var ig skillIgnores
		ig.load(dir, tc.rel, entries)
		if got := ig.ignores(tc.path, tc.dir); got != tc.want {
			t.Errorf("%q in %q: ignores(%q, dir %v) = %v, want %v", tc.lines, tc.rel, tc.path, tc.dir, got, tc.want)
		}
	}
}

// TestSkillIgnoresBounded: a walk reads at most maxIgnoreRules rules,
// and none longer than maxIgnoreRuleBytes; the rest are named in a
// warning, and a skill the first rules leave out stays out.
func TestSkillIgnoresBounded(t *testing.T) {
	dir := t.TempDir()
	var text strings.Builder
	text.WriteString("gone/\n")
	for i := range maxIgnoreRules {
		text.WriteString(strings.Repeat("*a", i%20) + "x/\n")
	}
	text.WriteString(strings.Repeat("*a", maxIgnoreRuleBytes) + "\n")
	for name, content := range map[string]string{
		".gitignore":    text.String(),
		"gone/SKILL.md": "---\ndescription: d\n---\n",
		"kept/SKILL.md": "---\ndescription: d\n---\n",
	} {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	paths, note := skillEntries(dir, true, false)
	if len(paths) != 1 || filepath.Base(filepath.Dir(paths[0])) != "kept" {
		t.Errorf("paths = %q, want kept/SKILL.md alone", paths)
	}
	if !strings.Contains(note, "512 rules") {
		t.Errorf("note = %q, want the rules cut", note)
	}
}

// TestSkillIgnoresWorkBounded: rules that are each slow to test (many
// * and ?, against long names) do not make a walk's work the product of
// its rules, their length and its entries: past maxIgnoreWork the walk
// stops, with a warning, as one past maxSkillEntries does. Without the
// bound, a project's .pi/skills held startup for minutes, also without
// --approve (its skills are counted).
func TestSkillIgnoresWorkBounded(t *testing.T) {
	var rules strings.Builder
	for i := range maxIgnoreRules {
		fmt.Fprintf(&rules, "%sq%d\n", strings.Repeat("?*", 100), i)
	}
	for _, kind := range []string{"skills", "prompts"} {
		dir := t.TempDir()
		folder := filepath.Join(dir, kind)
		if err := os.MkdirAll(folder, 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{".gitignore": rules.String()}
		for i := range 300 {
			files[fmt.Sprintf("%s%03d.md", strings.Repeat("a", 200), i)] = "---\ndescription: d\n---\n"
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(folder, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var paths []string
		var note string
		if kind == "skills" {
			paths, note = skillEntries(folder, true, false)
		} else {
			paths, note = templateFiles(dir)
		}
		if len(paths) >= 300 || !strings.Contains(note, "ignore files") {
			t.Errorf("%s: %d paths, note %q; want the walk stopped", kind, len(paths), note)
		}
	}
}

// TestResourcePatternsWorkBounded: settings.json's globs that are each
// slow to match (many * and ?, against long names) do not make the work
// the product of their number, their length and the files: past
// maxGlobWork the rest of the files are not loaded, with a warning.
// Without the bound, 200 of them over 2,000 skills held startup for
// minutes.
func TestResourcePatternsWorkBounded(t *testing.T) {
	var entries []string
	for i := range 200 {
		entries = append(entries, "!"+strings.Repeat("?*", 1000)+fmt.Sprint("q", i))
	}
	var files []string
	for i := range 2000 {
		files = append(files, fmt.Sprintf("/p/skills/%s%04d.md", strings.Repeat("a", 200), i))
	}
	_, p := splitResourceEntries(entries, "")
	on := p.apply(files, "/p")
	if n := len(slices.DeleteFunc(on, func(b bool) bool { return !b })); n >= len(files) {
		t.Errorf("%d of %d files on; want the rest left out once the globs are spent", n, len(files))
	}
	if note := p.spentNote("skills", "settings.json"); !strings.Contains(note, "take too long") {
		t.Errorf("note = %q", note)
	}
	_, p = splitResourceEntries(entries, "")
	if n := len(slices.DeleteFunc(slices.Clone(files), func(f string) bool { return !p.enabled(f, "/p") })); n >= len(files) {
		t.Errorf("%d of %d files found on their own on; want the rest left out once the globs are spent", n, len(files))
	}
}

// TestSkillIgnoresBytesBounded: a walk reads at most maxIgnoreBytes of
// ignore files, all told: past it the rest are not read, with the
// warning of rules left unread, and the skills are still found. Before,
// every folder's ignore file was read whole (up to 1 MiB each): 9,000
// folders of one (a repository stores the same file once) held startup
// for half a minute, also without --approve.
func TestSkillIgnoresBytesBounded(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("# "+strings.Repeat("x", 60)+"\n", maxIgnoreBytes/64/2)
	for i := range 8 {
		sub := filepath.Join(dir, fmt.Sprint("d", i))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, ".gitignore"), []byte(big+"gone.md\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, "SKILL.md"), []byte("---\ndescription: d\n---\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var ig skillIgnores
	for i := range 8 {
		sub := filepath.Join(dir, fmt.Sprint("d", i))
		entries, _ := os.ReadDir(sub)
		ig.load(sub, fmt.Sprint("d", i), entries)
	}
	if ig.read > maxIgnoreBytes || !ig.cut || len(ig.rules) == 0 {
		t.Errorf("read %d bytes (at most %d), cut %v, %d rules; want the first files read and the rest cut", ig.read, maxIgnoreBytes, ig.cut, len(ig.rules))
	}
	paths, note := skillEntries(dir, true, false)
	if len(paths) != 8 || !strings.Contains(note, "ignore files") {
		t.Errorf("paths %q, note %q; want the 8 skills, and the warning", paths, note)
	}
}
