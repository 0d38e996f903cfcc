package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestExampleClients runs the three example clients of docs/clients.md
// (Python, Node and Go) as they stand there, with the test binary as rpi
// and a fake model: each must print the streamed answer, put the model's
// question to the "terminal" (its stdin), send the answer back, and exit
// when the agent settles. A client whose runtime is not installed is
// skipped, and go test ./... says so without -v (needProgram). The
// README's Python client must be the one tested here.
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
			runtime := needProgram(t, c.runtime)
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

// skippedForPrograms lists the tests skipped because a program they need
// is not installed, with the program, for TestMain to report.
var skippedForPrograms struct {
	sync.Mutex
	tests []string
}

// needProgram is the path of program (node, python3, go), or skips t,
// noting it for reportSkippedForPrograms.
func needProgram(t *testing.T, program string) string {
	path, err := exec.LookPath(program)
	if err != nil {
		skippedForPrograms.Lock()
		skippedForPrograms.tests = append(skippedForPrograms.tests, fmt.Sprintf("%s (%s is not installed)", t.Name(), program))
		skippedForPrograms.Unlock()
		t.Skipf("%s is not installed", program)
	}
	return path
}

// reportSkippedForPrograms says on stderr which tests were skipped for
// want of a program. go test ./... shows a passing package's output only
// with -v, so without -v the line also goes to the go command's own
// stderr, where /proc shows it (Linux); elsewhere, run go test -v to see it.
func reportSkippedForPrograms() {
	if len(skippedForPrograms.tests) == 0 {
		return
	}
	line := "rpi: skipped for want of a program: " + strings.Join(skippedForPrograms.tests, ", ") + "\n"
	os.Stderr.WriteString(line)
	if testing.Verbose() {
		return
	}
	parent := fmt.Sprintf("/proc/%d/fd/2", os.Getppid())
	theirs, err1 := os.Stat(parent)
	ours, err2 := os.Stderr.Stat()
	if err1 != nil || err2 != nil || os.SameFile(theirs, ours) {
		return // no /proc, or our stderr is theirs already
	}
	if f, err := os.OpenFile(parent, os.O_WRONLY|os.O_APPEND, 0); err == nil {
		f.WriteString(line)
		f.Close()
	}
}
