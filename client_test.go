package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPythonClient runs the example client from README.md, as it stands
// there, against the built rpi and a fake model: it must print the
// streamed answer, put the model's question to the "terminal" (stdin
// here), send the answer back, and exit when the agent settles.
func TestPythonClient(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(readme, []byte("```python\n"))
	code, _, ok2 := bytes.Cut(rest, []byte("```"))
	if !ok || !ok2 {
		t.Fatal("README.md has no ```python block")
	}
	dir, agent := t.TempDir(), t.TempDir()
	client := filepath.Join(dir, "client.py")
	os.WriteFile(client, code, 0o644)
	startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"q","name":"ask_user","args":["{\"question\":\"Which color?\",\"options\":[\"red\",\"blue\"]}"]}]}
{"text":["You ","picked ","blue."]}`, agent)
	cmd := exec.Command(python, client, "Pick", "a", "color")
	cmd.Dir = dir
	cmd.Env = withoutKeys(append(os.Environ(), "RPI="+rpiBinary(t), "PI_CODING_AGENT_DIR="+agent))
	cmd.Stdin = strings.NewReader("blue\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("client failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.Bytes(), stderr.Bytes())
	}
	if !strings.Contains(stdout.String(), "You picked blue.") || !strings.Contains(stderr.String(), "Which color?") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout.Bytes(), stderr.Bytes())
	}
}
