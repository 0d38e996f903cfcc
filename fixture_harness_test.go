package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFixtureUnknownPartsRefused: a fixture's section or option the
// harness does not act on is refused, not ignored. A misspelt
// "-- sterr --", or an "exit 2" given to rpi serve's runner (which
// compares neither stderr nor the exit code), left the comparison it
// meant out, and the fixture passed whatever rpi did; so did a want
// section for a client the script never names.
func TestFixtureUnknownPartsRefused(t *testing.T) {
	const input = "It shows something.\n-- input.jsonl --\n{\"type\":\"get_state\"}\n-- want.jsonl --\n"
	const script = "It shows something.\n-- script --\n#connect a\na: {\"type\":\"get_state\"}\n-- a.want.jsonl --\n"
	for _, tt := range []struct {
		name, text string
		refused    bool
	}{
		{"an input fixture as it is", input, false},
		{"its stderr, session file and files", input + "-- stderr --\n-- session.jsonl --\n-- file a.txt --\nx\n-- agent settings.json --\n{}\n", false},
		{"its options", input + "-- options --\nexit 2\nclock fake\nhide setStatus\nenv A b\nmcpHTTPServer\n", false},
		{"an MCP server over HTTP in a serve fixture", script + "-- options --\nmcpHTTPServer\n", true},
		{"a misspelt section", input + "-- sterr --\nrpi: no\n", true},
		{"a misspelt option", input + "-- options --\nexitcode 2\n", true},
		{"a serve fixture as it is", script + "-- options --\nhide setStatus\n-- agent settings.json --\n{}\n", false},
		{"a serve fixture's stderr", script + "-- stderr --\nrpi: no\n", true},
		{"a serve fixture's session file", script + "-- session.jsonl --\n", true},
		{"a serve fixture's exit code", script + "-- options --\nexit 2\n", true},
		{"a want section for no client", script + "-- b.want.jsonl --\n{}\n", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.txtar")
			if err := os.WriteFile(path, []byte(tt.text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := parseFixture(path)
			if (err != nil) != tt.refused {
				t.Errorf("parseFixture: %v; want refused %v", err, tt.refused)
			}
			if err != nil && !strings.Contains(err.Error(), path) {
				t.Errorf("the refusal %q does not name the fixture", err)
			}
		})
	}
}
