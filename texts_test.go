package main

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// textsWithoutFixture lists the error texts no fixture shows yet, each
// under a comment saying why (TestErrorTextsHaveFixtures).
const textsWithoutFixture = "testdata/texts-without-fixture.txt"

// TestErrorTextsHaveFixtures keeps rpi's rule that every error text a user
// can see has a fixture showing it: each format string given to
// fmt.Errorf, errors.New or invalidParams, and each stderr line
// (fmt.Fprintf or Fprintln of a text starting "rpi"), in the code of every
// system, must either be shown by a fixture under testdata/ (each of its
// fixed parts of 6 bytes or more, between the format verbs, in some
// fixture, as written or JSON-escaped) or be listed in
// testdata/texts-without-fixture.txt under a reason. A listed text that a
// fixture now shows, or that the code no longer has, fails the test too,
// so that the list only shrinks. Texts built otherwise (constants,
// Sprintf, the model's tool texts) are not checked.
func TestErrorTextsHaveFixtures(t *testing.T) {
	corpus := fixtureCorpus(t)
	listed := readTextsWithoutFixture(t)
	found := map[string]bool{}
	for _, text := range errorTextsOfTheCode(t) {
		if found[text.text] {
			continue
		}
		found[text.text] = true
		shown := textShown(corpus, text.text)
		switch _, ok := listed[text.text]; {
		case !shown && !ok:
			t.Errorf("%s: %q has no fixture: add a case under testdata/ that shows it, or list it with its reason in %s",
				text.pos, text.text, textsWithoutFixture)
		case shown && ok:
			t.Errorf("%s lists %q, which a fixture shows now: take it off the list", textsWithoutFixture, text.text)
		}
	}
	for text, line := range listed {
		if !found[text] {
			t.Errorf("%s:%d: %q is no error text of the code (any more): take it off the list", textsWithoutFixture, line, text)
		}
	}
}

type textInCode struct {
	pos  string // file:line
	text string // the literal, unquoted
}

// errorTextsOfTheCode are the error texts TestErrorTextsHaveFixtures
// checks, in the order of the files and their lines.
func errorTextsOfTheCode(t *testing.T) []textInCode {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	fset := token.NewFileSet()
	var texts []textInCode
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			var name string
			switch fn := call.Fun.(type) {
			case *ast.SelectorExpr:
				if x, ok := fn.X.(*ast.Ident); ok {
					name = x.Name + "." + fn.Sel.Name
				}
			case *ast.Ident:
				name = fn.Name
			}
			arg := call.Args[0]
			if name == "fmt.Fprintf" || name == "fmt.Fprintln" {
				if len(call.Args) < 2 {
					return true
				}
				arg = call.Args[1]
			}
			lit, ok := arg.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			text, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			switch name {
			case "fmt.Errorf", "errors.New", "invalidParams":
			case "fmt.Fprintf", "fmt.Fprintln":
				if !strings.HasPrefix(text, "rpi") {
					return true
				}
			default:
				return true
			}
			if len(fixedParts(text)) > 0 {
				texts = append(texts, textInCode{fset.Position(lit.Pos()).String(), text})
			}
			return true
		})
	}
	if len(texts) < 300 {
		t.Fatalf("found only %d error texts in the code", len(texts))
	}
	return texts
}

// formatVerb is a verb of fmt's, with its flags, width and precision.
var formatVerb = regexp.MustCompile(`%[-+# 0-9.*\[\]]*[a-zA-Z%]`)

// fixedParts are a format string's parts between its verbs, trimmed, of 6
// bytes or more: what a fixture showing the text holds whatever the
// values.
func fixedParts(format string) []string {
	var parts []string
	for _, part := range formatVerb.Split(format, -1) {
		if part = strings.TrimSpace(part); len(part) >= 6 {
			parts = append(parts, part)
		}
	}
	return parts
}

// textShown reports whether the fixtures (corpus) show every fixed part
// of text.
func textShown(corpus []byte, text string) bool {
	for _, part := range fixedParts(text) {
		if !bytes.Contains(corpus, []byte(part)) {
			return false
		}
	}
	return true
}

// fixtureCorpus is every fixture's text, then the same with JSON's
// escapes read (a text's quotes and <>& as its JSON lines show them).
func fixtureCorpus(t *testing.T) []byte {
	var all []byte
	err := filepath.WalkDir("testdata", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".txtar") {
			return err
		}
		b, err := os.ReadFile(path)
		all = append(append(all, b...), 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	unescaped := strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\u003c`, "<", `\u003e`, ">", `\u0026`, "&", `\n`, "\n", `\t`, "\t").Replace(string(all))
	return append(all, unescaped...)
}

// readTextsWithoutFixture reads textsWithoutFixture: a text a line, its
// quotes and backslashes as the Go literal's (strconv.Quote without the
// outer quotes); # starts a comment, each group's reason.
func readTextsWithoutFixture(t *testing.T) map[string]int {
	f, err := os.Open(textsWithoutFixture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]int{}
	reason := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r") // a checkout that made its line ends CRLF
		switch {
		case line == "":
			reason = false
			continue
		case strings.HasPrefix(line, "#"):
			reason = true
			continue
		case !reason:
			t.Errorf("%s:%d: a text with no reason above it (a # comment)", textsWithoutFixture, n)
		}
		text, err := strconv.Unquote(`"` + line + `"`)
		if err != nil {
			t.Fatalf("%s:%d: %v", textsWithoutFixture, n, err)
		}
		if _, twice := listed[text]; twice {
			t.Errorf("%s:%d: listed twice", textsWithoutFixture, n)
		}
		listed[text] = n
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return listed
}
