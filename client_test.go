package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExampleClients runs the three example clients of docs/clients.md
// (Python, Node and Go) as they stand there, with the test binary as rpi
// and a fake model: each must print the streamed answer, put the model's
// question to the "terminal" (its stdin), send the answer back, and exit
// when the agent settles. A client whose runtime is not installed is
// skipped. The README's Python client must be the one tested here.
func TestExampleClients(t *testing.T) {
	endToEnd(t)
	doc, err := os.ReadFile("docs/clients.md")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := firstBlock(readme, "python"), firstBlock(doc, "python"); a != b || a == "" {
		t.Errorf("README.md's Python client is not the one in docs/clients.md")
	}
	for _, c := range []struct {
		lang, file, runtime string
		args                []string
	}{
		{"python", "client.py", "python3", []string{"client.py"}},
		{"js", "client.mjs", "node", []string{"client.mjs"}},
		{"go", "client.go", "go", []string{"run", "client.go"}},
	} {
		t.Run(c.lang, func(t *testing.T) {
			runtime, err := exec.LookPath(c.runtime)
			if err != nil {
				t.Skipf("%s is not installed", c.runtime)
			}
			code := firstBlock(doc, c.lang)
			if code == "" {
				t.Fatalf("docs/clients.md has no ```%s block", c.lang)
			}
			dir, agent := t.TempDir(), t.TempDir()
			os.WriteFile(filepath.Join(dir, c.file), []byte(code), 0o644)
			startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"q","name":"ask_user","args":["{\"question\":\"Which color?\",\"options\":[\"red\",\"blue\"]}"]}]}
{"text":["You ","picked ","blue."]}`, agent)
			cmd := exec.Command(runtime, append(c.args, "Pick", "a", "color")...)
			cmd.Dir = dir
			// The client starts RPI: the test binary, as rpi, in an
			// environment of its own.
			cmd.Env = append(withoutVariables(os.Environ(), hiddenVars), "RPI="+os.Args[0], "RPI_TEST_MAIN=1",
				"GORACE=atexit_sleep_ms=0", "PI_CODING_AGENT_DIR="+agent, "HOME="+t.TempDir(), "TMPDIR="+t.TempDir())
			if c.runtime == "go" {
				// go run keeps using the developer's build cache.
				cache, _ := exec.Command(runtime, "env", "GOCACHE").Output()
				cmd.Env = append(cmd.Env, "GOCACHE="+strings.TrimSpace(string(cache)))
			}
			cmd.Stdin = strings.NewReader("blue\n")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("client failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.Bytes(), stderr.Bytes())
			}
			if !strings.Contains(stdout.String(), "You picked blue.") || !strings.Contains(stderr.String(), "Which color?") {
				t.Errorf("stdout:\n%s\nstderr:\n%s", stdout.Bytes(), stderr.Bytes())
			}
		})
	}
}

// firstBlock is the text of the first fenced block of a language in a
// Markdown file ("" when there is none).
func firstBlock(md []byte, lang string) string {
	for _, b := range fencedBlocks(md) {
		if b.lang == lang {
			return b.text
		}
	}
	return ""
}
