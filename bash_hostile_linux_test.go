package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// holdOutput leaves a sleep behind in a session of its own that still
// holds the command's output, and prints "escaped PID" once the sleep is
// there (as escapeCommand does): rpi waits for the output to end after
// the shell exits, up to killGrace.
const holdOutput = `setsid sleep 300 & p=$!
for i in $(seq 1000); do
	[ "$(cut -d' ' -f6 /proc/$p/stat)" = $p ] && [ "$(cat /proc/$p/comm)" = sleep ] && break
	sleep 0.01
done
echo escaped $p`

// killEscaped SIGKILLs the sleep that text says escaped, if still a sleep.
func killEscaped(text string) {
	if m := regexp.MustCompile(`escaped (\d+)`).FindStringSubmatch(text); m != nil {
		pid, _ := strconv.Atoi(m[1])
		killIfSleep(pid)
	}
}

// TestTimeoutAfterTheCommandExited: a command that exited by itself, with
// code 0, well within its timeout is not told as timed out when the
// timeout passes only while rpi waits for its output to end (a process
// it left in a session of its own holds it). The model's bash said
// "Command timed out after 1 seconds", and the user's bash answered
// "cancelled":true with "exitCode":0.
func TestTimeoutAfterTheCommandExited(t *testing.T) {
	endToEnd(t)
	s := toolServer(t, nil)
	args, _ := json.Marshal(map[string]any{"command": holdOutput, "timeout": 1})
	text, isError := callTool(t, s, "bash", string(args))
	killEscaped(text)
	if isError || strings.Contains(text, "timed out") {
		t.Errorf("the model's bash: error %v, %q; want the exit 0 it had", isError, text)
	}

	ps := startSession(t)
	line, _ := json.Marshal(map[string]any{"id": "b", "type": "bash", "command": holdOutput, "timeout": 1})
	ps.send(string(line))
	ps.waitFor(`"id":"b"`)
	for _, rec := range ps.close() {
		if rec["id"] == "b" {
			data, _ := rec["data"].(map[string]any)
			killEscaped(data["output"].(string))
			if data["cancelled"] != false || data["exitCode"] != float64(0) {
				t.Errorf("the user's bash: %v; want not cancelled, exit code 0", data)
			}
		}
	}
}
