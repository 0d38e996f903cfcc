package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// piFrontMatter is what pi 1.6's parseFrontmatter makes of an input: its
// error, or the fields rpi uses (nil: missing or not a string) and body.
type piFrontMatter struct {
	Input       string  `json:"input"`
	Error       string  `json:"error,omitempty"`
	Name        *string `json:"name"`
	Description *string `json:"description"`
	Hidden      bool    `json:"hidden"`
	Body        string  `json:"body"`
}

// rpiFrontMatter is rpi's reading of input in piFrontMatter's terms.
func rpiFrontMatter(input string) piFrontMatter {
	fields, body, err := frontMatter(input)
	got := piFrontMatter{Input: input, Body: body, Hidden: fields.isTrue("disable-model-invocation")}
	if err != nil {
		return piFrontMatter{Input: input, Error: err.Error()}
	}
	for key, p := range map[string]**string{"name": &got.Name, "description": &got.Description} {
		if v := fields[key]; v.kind == 's' {
			*p = &v.text
		}
	}
	return got
}

// TestFrontMatterAgainstPi compares rpi with pi on the cases that
// scripts/frontmatter-fuzz.mjs wrote to $RPI_FRONTMATTER_CASES (it needs
// node and pi, so it is not run otherwise). An input both read alike or
// both refuse passes; one pi reads and rpi refuses is logged (rpi does not
// guess); any other difference fails.
func TestFrontMatterAgainstPi(t *testing.T) {
	path := os.Getenv("RPI_FRONTMATTER_CASES")
	if path == "" {
		t.Skip("RPI_FRONTMATTER_CASES is not set")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []piFrontMatter
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	same, refused := 0, 0
	for _, want := range cases {
		got := rpiFrontMatter(want.Input)
		switch {
		case (got.Error != "") != (want.Error != "") && got.Error != "":
			refused++
			t.Logf("rpi refuses what pi reads: %q: %s", want.Input, got.Error)
		case (got.Error != "") != (want.Error != ""):
			t.Errorf("rpi reads what pi refuses (%s): %q", want.Error, want.Input)
		case got.Error != "":
			same++
		case !sameFrontMatter(got, want):
			t.Errorf("%q:\n got %s\nwant %s", want.Input, show(got), show(want))
		default:
			same++
		}
	}
	t.Logf("%d cases: %d as pi, %d refused by rpi and read by pi", len(cases), same, refused)
}

func sameFrontMatter(a, b piFrontMatter) bool {
	eq := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return eq(a.Name, b.Name) && eq(a.Description, b.Description) && a.Hidden == b.Hidden && a.Body == b.Body
}

func show(v piFrontMatter) string {
	v.Input = ""
	data, _ := json.Marshal(v)
	return string(data)
}

// noText marks a field that is missing or not a string (pi's typeof !== "string").
const noText = "\x00no text"

// TestFrontMatterAsPi: front matter is read as pi 1.6 reads it, YAML by
// the yaml package: plain, quoted and block (| >) values; a value that is
// not a string (a number, true, null, a list, a mapping) is no name or
// description; nested mappings and lists are read through; what YAML
// refuses, rpi refuses (the file is skipped with a warning).
//
// Each row is what pi's own parseFrontmatter gave for its input (the
// first column), run under node 22 with pi-coding-agent 1.6 by this
// script, given the inputs as a JSON array on stdin:
//
//	import { parseFrontmatter } from "PI/dist/utils/frontmatter.js";
//	process.on("warning", () => {});
//	const inputs = JSON.parse(await new Promise((r) => { let s = "";
//	  process.stdin.on("data", (d) => (s += d)); process.stdin.on("end", () => r(s)); }));
//	const q = (v) => (typeof v === "string" ? JSON.stringify(v) : "noText");
//	for (const input of inputs) try {
//	  const { frontmatter: f } = parseFrontmatter(input);
//	  console.log(`{${JSON.stringify(input)}, ${q(f.name)}, ${q(f.description)}, ${f["disable-model-invocation"] === true}, false},`);
//	} catch (e) {
//	  console.log(`{${JSON.stringify(input)}, "", "", false, true}, // ${e.message.split("\n")[0]}`);
//	}
//
// (node --input-type=module, PI the package's folder.) pi's refusal is
// its yaml package's message, noted on the row. Three rows use YAML that
// rpi does not read (a "?" key, an anchor, a tag): pi reads them, rpi
// refuses them, as marked on the row. The real shapes at the end are
// front matter of public SKILL.md and command files (Anthropic's
// mcp-builder among them).
func TestFrontMatterAsPi(t *testing.T) {
	for _, c := range []struct {
		input, name, description string
		hidden, refused          bool
	}{
		{"---\nname: deploy\ndescription: Deploy the app\n---\nbody\n", "deploy", "Deploy the app", false, false},
		{"---\ndescription: Deploy it # not part of it\n---\nbody\n", noText, "Deploy it", false, false},
		{"---\ndescription: Deploy#1 is text\n---\nbody\n", noText, "Deploy#1 is text", false, false},
		{"---\ndescription: a plain value\n  continued on the next line\n\n  and a paragraph\n---\nbody\n", noText, "a plain value continued on the next line\nand a paragraph", false, false},
		{"---\ndescription:\n  on the line below\n  and the next\n---\nbody\n", noText, "on the line below and the next", false, false},
		{"---\ndescription: http://example.com/a:b\n---\nbody\n", noText, "http://example.com/a:b", false, false},
		{"---\ndescription: It's fine\n---\nbody\n", noText, "It's fine", false, false},
		{"---\ndescription: a: b\n---\nbody\n", "", "", false, true},                          // Nested mappings are not allowed in compact mappings at line 1, column 14:
		{"---\ndescription: ,start\n---\nbody\n", "", "", false, true},                        // Plain value cannot start with flow indicator character , at line 1, column 14:
		{"---\ndescription: - list\n---\nbody\n", "", "", false, true},                        // Unexpected block-seq-ind on same line with key at line 1, column 14:
		{"---\ndescription: a\n  # a comment ends it\n  b\n---\nbody\n", "", "", false, true}, // All mapping items must start at the same column at line 3, column 1:
		{"---\ndescription: |\n  line one\n  line two\n\n  after a blank\n---\nbody\n", noText, "line one\nline two\n\nafter a blank\n", false, false},
		{"---\ndescription: >\n  folded\n  into one\n\n  paragraph two\n    more indented\n  back\n---\nbody\n", noText, "folded into one\nparagraph two\n  more indented\nback\n", false, false},
		{"---\ndescription: |-\n  no final newline\n---\nbody\n", noText, "no final newline", false, false},
		{"---\ndescription: >-\n  folded\n  stripped\n---\nbody\n", noText, "folded stripped", false, false},
		{"---\ndescription: |+\n  kept\n\n\n---\nbody\n", noText, "kept\n\n", false, false},
		{"---\ndescription: >+\n  kept\n\nname: x\n---\nbody\n", "x", "kept\n\n", false, false},
		{"---\ndescription: |2\n    two spaces kept\n  at indent\n---\nbody\n", noText, "  two spaces kept\nat indent\n", false, false},
		{"---\ndescription: >1-\n  one space kept\n---\nbody\n", noText, " one space kept", false, false},
		{"---\ndescription: | # comment\n  text\n---\nbody\n", noText, "text\n", false, false},
		{"---\ndescription: |\n\n  leading blank\n---\nbody\n", noText, "\nleading blank\n", false, false},
		{"---\ndescription: |x\n  bad header\n---\nbody\n", "", "", false, true},                      // Block scalar header includes extra characters: |x at line 1, column 15:
		{"---\ndescription: |\n   \n  leading line of more spaces\n---\nbody\n", "", "", false, true}, // Block scalars with more-indented leading empty lines must use an explicit indentation indicator at line 3, column 3:
		{"---\ndescription: |\n\n---\nbody\n", noText, "", false, false},
		{"---\ndescription: \"Deploy \\\"it\\\" now\"\n---\nbody\n", noText, "Deploy \"it\" now", false, false},
		{"---\ndescription: \"caf\\u00e9 \\x41 tab\\there\\nnext\"\n---\nbody\n", noText, "café A tab\there\nnext", false, false},
		{"---\ndescription: \"spans\n  two lines\n\n  and a break\"\n---\nbody\n", noText, "spans two lines\nand a break", false, false},
		{"---\ndescription: \"escaped \\\n  line break\"\n---\nbody\n", noText, "escaped line break", false, false},
		{"---\ndescription: \"bad \\q escape\"\n---\nbody\n", "", "", false, true}, // Invalid escape sequence \q at line 1, column 19:
		{"---\ndescription: \"unclosed\n---\nbody\n", "", "", false, true},         // Missing closing "quote at line 1, column 23:
		{"---\ndescription: \"text\" after\n---\nbody\n", "", "", false, true},     // Unexpected scalar at node end at line 1, column 21:
		{"---\ndescription: \"text\" # comment\n---\nbody\n", noText, "text", false, false},
		{"---\ndescription: \"col zero\ncontinuation\"\n---\nbody\n", "", "", false, true}, // Missing closing "quote at line 1, column 23:
		{"---\ndescription: \"\\ud83d\\ude00 surrogates\"\n---\nbody\n", noText, "😀 surrogates", false, false},
		{"---\ndescription: 'It''s quoted'\n---\nbody\n", noText, "It's quoted", false, false},
		{"---\ndescription: 'spans\n  lines'\n---\nbody\n", noText, "spans lines", false, false},
		{"---\ndescription: ''\n---\nbody\n", noText, "", false, false},
		{"---\ndescription: 'unclosed\n---\nbody\n", "", "", false, true}, // Missing closing 'quote at line 1, column 23:
		{"---\ndescription: 123\n---\nbody\n", noText, noText, false, false},
		{"---\ndescription: 1.5e3\n---\nbody\n", noText, noText, false, false},
		{"---\ndescription: 0x1F\n---\nbody\n", noText, noText, false, false},
		{"---\ndescription: .inf\n---\nbody\n", noText, noText, false, false},
		{"---\ndescription: null\n---\nbody\n", noText, noText, false, false},
		{"---\ndescription: ~\n---\nbody\n", noText, noText, false, false},
		{"---\ndescription:\n---\nbody\n", noText, noText, false, false},
		{"---\ndescription: true\n---\nbody\n", noText, noText, false, false},
		{"---\ndescription: [a, b]\n---\nbody\n", noText, noText, false, false},
		{"---\ndescription: {a: b}\n---\nbody\n", noText, noText, false, false},
		{"---\ndescription:\n  - a\n  - b\n---\nbody\n", noText, noText, false, false},
		{"---\ndescription:\n- a\n- b\nname: x\n---\nbody\n", "x", noText, false, false},
		{"---\ndescription:\n  key: value\n---\nbody\n", noText, noText, false, false},
		{"---\nname: true\ndescription: d\n---\nbody\n", noText, "d", false, false},
		{"---\nname: 42\ndescription: d\n---\nbody\n", noText, "d", false, false},
		{"---\nname: ''\ndescription: d\n---\nbody\n", "", "d", false, false},
		{"---\ndescription: yes\n---\nbody\n", noText, "yes", false, false},
		{"---\ndescription: 1_000\n---\nbody\n", noText, "1_000", false, false},
		{"---\ndescription: +1\n---\nbody\n", noText, noText, false, false},
		{"---\ndescription: d\ndisable-model-invocation: true\n---\nbody\n", noText, "d", true, false},
		{"---\ndescription: d\ndisable-model-invocation: True # hide\n---\nbody\n", noText, "d", true, false},
		{"---\ndescription: d\ndisable-model-invocation: TRUE\n---\nbody\n", noText, "d", true, false},
		{"---\ndescription: d\ndisable-model-invocation: 'true'\n---\nbody\n", noText, "d", false, false},
		{"---\ndescription: d\ndisable-model-invocation: yes\n---\nbody\n", noText, "d", false, false},
		{"---\ndescription: d\ndisable-model-invocation: false\n---\nbody\n", noText, "d", false, false},
		{"---\nname: s\ndescription: d\nmetadata:\n  version: \"1.0\"\n  description: nested, not the skill's\n  name: nested\n---\nbody\n", "s", "d", false, false},
		{"---\nname: s\ndescription: d\nallowed-tools:\n  - Read\n  - Bash(git:*)\nlicense: MIT\n---\nbody\n", "s", "d", false, false},
		{"---\ndescription: d\nallowed-tools:\n  [\"Read\", \"Write\",\n   \"Grep\"]\n---\nbody\n", noText, "d", false, false},
		{"---\ndescription: d\nmetadata:\n  deep:\n    - k: v\n      j: [1, {a: b}]\n    - - x\n---\nbody\n", noText, "d", false, false},
		{"---\ndescription: d\nmetadata:\n  a: 1\n   b: 2\n---\nbody\n", "", "", false, true}, // Nested mappings are not allowed in compact mappings at line 3, column 6:
		{"---\ndescription: d\nmetadata:\n  a: 1\n  a: 2\n---\nbody\n", "", "", false, true},  // Map keys must be unique at line 4, column 3:
		{"---\n\"description\": quoted key\n---\nbody\n", noText, "quoted key", false, false},
		{"---\n'name': quoted\ndescription: d\n---\nbody\n", "quoted", "d", false, false},
		{"---\ndescription : space before the colon\n---\nbody\n", noText, "space before the colon", false, false},
		{"---\ndescription: one\ndescription: two\n---\nbody\n", "", "", false, true}, // Map keys must be unique at line 2, column 1:
		{"---\ndescription: d\n? complex\n: key\n---\nbody\n", "", "", false, true},   // rpi's: pi reads description "d"
		{"---\ndescription: &a anchored\n---\nbody\n", "", "", false, true},           // rpi's: pi reads description "anchored"
		{"---\ndescription: !!str 123\n---\nbody\n", "", "", false, true},             // rpi's: pi reads description "123"
		{"---\ndescription: *alias\n---\nbody\n", "", "", false, true},                // Unresolved alias (the anchor must be set before the alias): alias
		{"---\n  description: an indented mapping\n  name: n\n---\nbody\n", "n", "an indented mapping", false, false},
		{"---\ndescription: d\n\tname: tab\n---\nbody\n", "", "", false, true}, // Tabs are not allowed as indentation at line 2, column 1:
		{"---\njust a scalar document\n---\nbody\n", noText, noText, false, false},
		{"---\n- a list document\n---\nbody\n", noText, noText, false, false},
		{"---\n# only a comment\n---\nbody\n", noText, noText, false, false},
		{"---\ndescription: d\n---", noText, "d", false, false},
		{"---x\ndescription: d\n---\nbody", noText, "d", false, false},
		{"---description: d\n---\nbody", noText, noText, false, false},
		{"---\n---\nbody", noText, noText, false, false},
		{"---\ndescription: d\n----\nbody", noText, "d", false, false},
		{"---\r\ndescription: d\r\n---\r\nbody", noText, "d", false, false},
		{"no front matter\n---\n", noText, noText, false, false},
		{"---\ndescription: d\n...\n---", noText, "d", false, false},
		{"---\n%YAML 1.2\ndescription: d\n---", "", "", false, true}, // Missing directives-end/doc-start indicator line at line 2, column 1:
		{"---\nname: mcp-builder\ndescription: Guide for creating high-quality MCP (Model Context Protocol) servers that enable LLMs to interact with external services through well-designed tools. Use when building MCP servers to integrate external APIs or services, whether in Python (FastMCP) or Node/TypeScript (MCP SDK).\nlicense: Complete terms in LICENSE.txt\n---\n\n# MCP Server Development Guide\n", "mcp-builder", "Guide for creating high-quality MCP (Model Context Protocol) servers that enable LLMs to interact with external services through well-designed tools. Use when building MCP servers to integrate external APIs or services, whether in Python (FastMCP) or Node/TypeScript (MCP SDK).", false, false},
		{"---\nname: document-pptx\ndescription: \"Create/edit .pptx presentations with charts, templates, and speaker notes. Use when asked for pitch decks, QBR decks, or slide automation.\"\nallowed-tools: Bash, Read, Write, Glob, Grep\n---\n\n# Document PPTX\n", "document-pptx", "Create/edit .pptx presentations with charts, templates, and speaker notes. Use when asked for pitch decks, QBR decks, or slide automation.", false, false},
		{"---\ndescription: Comprehensive accessibility audit with WCAG 2.1 Level AA compliance\nargument-hint: \"[focus-area]\"\nallowed-tools: Read, Glob, Grep, Write, Edit, Bash(npm:*), Bash(ddev exec npm:*)\n---\n\nYou are helping\n", noText, "Comprehensive accessibility audit with WCAG 2.1 Level AA compliance", false, false},
		{"---\nname: research-synthesis\ndescription: |\n  Synthesizes a grounded answer from retrieved passages.\n  Use when the user asks to explain or compare.\n  Do NOT use for saving notes.\nallowed-tools: [search_knowledge_base]\nmetadata:\n  author: defne\n---\n# Research Synthesis\n", "research-synthesis", "Synthesizes a grounded answer from retrieved passages.\nUse when the user asks to explain or compare.\nDo NOT use for saving notes.\n", false, false},
		{"---\nname: site-search\ndescription: Types a query into a site's search input and applies filter facets.\nversion: 0.1.0\nallowed-tools: [wait_for_dom_ready, fill, click, press_key, try_each, wait]\nmetadata:\n  applies_to: any-website\n  url_patterns: [\"*\"]\n  dom_markers:\n    - \"input[type='search']\"\n    - \"[role='search']\"\n---\n", "site-search", "Types a query into a site's search input and applies filter facets.", false, false},
	} {
		fields, _, err := frontMatter(c.input)
		if (err != nil) != c.refused {
			t.Errorf("%q: error %v, want refused %v", c.input, err, c.refused)
			continue
		}
		if err != nil {
			continue
		}
		for key, want := range map[string]string{"name": c.name, "description": c.description} {
			got := noText
			if v, ok := fields[key]; ok && v.kind == 's' {
				got = v.text
			}
			if got != want {
				t.Errorf("%q: %s %q, want %q", c.input, key, got, want)
			}
		}
		if got := fields.isTrue("disable-model-invocation"); got != c.hidden {
			t.Errorf("%q: disable-model-invocation %v, want %v", c.input, got, c.hidden)
		}
	}
}

// TestFrontMatterHostile: front matter made to exhaust a reader (nesting
// without end, a line of megabytes, a value over many lines) is read or
// refused, in work linear in its size: nesting deeper than maxYAMLDepth is
// refused as an error.
func TestFrontMatterHostile(t *testing.T) {
	deep := func(open, close string, n int) string {
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	var nested strings.Builder
	for i := range 1000 {
		nested.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	for _, c := range []struct {
		input, description string // "" when refused
	}{
		{"---\ndescription: " + deep("[", "]", 100000) + "\n---", ""},
		{"---\ndescription: " + deep("{a: ", "}", 100000) + "\n---", ""},
		{"---\n" + nested.String() + "description: d\n---", ""},
		{"---\ndescription: " + strings.Repeat("- ", 100000) + "x\n---", ""},
		{"---\nk:\n" + strings.Repeat("- ", 100000) + "x\ndescription: d\n---", ""},
		{"---\ndescription: " + strings.Repeat("x", 8<<20) + "\n---", strings.Repeat("x", 8<<20)},
		{"---\ndescription: \"" + strings.Repeat("x\n  ", 200000) + "\"\n---", strings.Repeat("x ", 200000)},
		{"---\ndescription: '" + strings.Repeat("\n", 200000) + " x'\n---", strings.Repeat("\n", 199999) + "x"},
		{"---\ndescription: >\n" + strings.Repeat("  x\n", 200000) + "---", strings.Repeat("x ", 199999) + "x\n"},
	} {
		fields, _, err := frontMatter(c.input)
		if c.description == "" {
			if err == nil {
				t.Errorf("%.60q…: read, want refused", c.input)
			}
			continue
		}
		if err != nil || fields.text("description") != c.description {
			t.Errorf("%.60q…: description %.60q…, error %v", c.input, fields.text("description"), err)
		}
	}
}

// FuzzFrontMatter: front matter of any bytes is read or refused with an
// error; nothing else (a panic of the reader's own, not a YAML error,
// would end rpi at startup over a file in the project).
func FuzzFrontMatter(f *testing.F) {
	for _, seed := range []string{
		"---\nname: deploy\ndescription: Deploy the app\n---\nbody\n",
		"---\ndescription: |-\n  no final newline\n---\n",
		"---\ndescription: >2\n   indented\n---\n",
		"---\ndescription: \"esc \\u00e9 \\\"q\\\" \\\n  joined\"\n---\n",
		"---\ndescription: 'it''s'\nmetadata:\n  version: 1\n  tags: [a, {b: c}]\nallowed-tools:\n  - Bash\n  - Read\n---\n",
		"---\nk:\n- a\n- - b\n  - c\n...\n# done\n---\n",
		"---\n? complex\n: key\n&a x: *a\n---\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input string) {
		fields, _, err := frontMatter(input)
		if err == nil {
			fields.text("description")
		}
	})
}
