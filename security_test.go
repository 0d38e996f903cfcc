package main

// Tests of the security model (docs/security.md): what the approval gate
// shows, where keys go and don't, what a hostile project or model server
// can do to rpi.

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestKeysNeverLeave has a model server echo the key it was sent — in a
// 401 body, then in an SSE error event — and checks that the key reaches
// neither stdout nor the session file nor an export, that get_state and
// get_available_models mask the baseUrl's password, and that children do
// not inherit the provider keys rpi read from its environment.
func TestKeysNeverLeave(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			http.Error(w, "invalid key: "+r.Header.Get("Authorization")+" (also "+r.URL.String()+")", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"error\":{\"message\":\"quota exceeded for %s\"}}\n\n", r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	e := newTestEnv(t)
	base := strings.Replace(srv.URL, "http://", "http://user:hunter2secret@", 1) + "/v1"
	os.WriteFile(filepath.Join(e.agentDir, "models.json"), []byte(`{"providers":{"p":{"baseUrl":"`+base+
		`","api":"openai-completions","apiKey":"`+key+`","models":[{"id":"m"}]}}}`), 0o644)
	os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(`{"retry":{"maxRetries":1,"baseDelayMs":1}}`), 0o644)
	e.vars["OPENAI_API_KEY"] = "sk-from-the-environment-42"
	cwd := t.TempDir()
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd})
	ps.send(`{"id":"p1","type":"prompt","message":"hi"}`)
	ps.waitFor(`"type":"agent_settled"`)
	ps.send(`{"id":"p2","type":"prompt","message":"again"}`)
	ps.waitFor(`"id":"p2"`)
	waitUntil(t, ps, func(out string) bool { return strings.Count(out, `"type":"agent_settled"`) >= 2 })
	ps.send(`{"id":"child","type":"bash","command":"echo ${OPENAI_API_KEY:-no key here}"}`)
	ps.waitFor(`"id":"child"`)
	ps.send(`{"id":"x","type":"export_html","outputPath":"out.html"}`)
	ps.waitFor(`"id":"x"`)
	ps.send(`{"id":"s","type":"get_state"}`)
	ps.send(`{"id":"m","type":"get_available_models"}`)
	ps.waitFor(`"id":"m"`)
	ps.close()
	out := ps.out.bytes()
	session, _ := filepath.Glob(filepath.Join(e.agentDir, "sessions", "*", "*.jsonl"))
	if len(session) != 1 {
		t.Fatalf("session files %v", session)
	}
	sessionData, _ := os.ReadFile(session[0])
	export, _ := os.ReadFile(filepath.Join(cwd, "out.html"))
	for name, data := range map[string][]byte{"stdout": out, "the session file": sessionData, "the export": export} {
		for _, secret := range []string{key, "hunter2secret", "sk-from-the-environment-42"} {
			if bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s holds the secret %s", name, secret)
			}
		}
	}
	for _, want := range []string{`invalid key: Bearer [redacted]`, `quota exceeded for Bearer [redacted]`, `no key here`,
		`"baseUrl":"http://user:***@`} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("stdout lacks %q", want)
		}
	}
}

// TestNoRedirects checks that a provider's redirect is not followed: the
// key, sent in a header, must not travel on to another host.
func TestNoRedirects(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the redirect was followed, with headers %v", r.Header)
	}))
	defer other.Close()
	srv := httptest.NewServer(http.RedirectHandler(other.URL+"/steal", http.StatusTemporaryRedirect))
	defer srv.Close()
	e := newTestEnv(t)
	os.WriteFile(filepath.Join(e.agentDir, "models.json"), []byte(`{"providers":{"p":{"baseUrl":"`+srv.URL+
		`","api":"anthropic-messages","apiKey":"sk-ant-0123456789","models":[{"id":"m"}]}}}`), 0o644)
	os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(`{"retry":{"maxRetries":1,"baseDelayMs":1}}`), 0o644)
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir()})
	ps.send(`{"id":"p","type":"prompt","message":"hi"}`)
	ps.waitFor(`"type":"agent_settled"`)
	ps.close()
	if !bytes.Contains(ps.out.bytes(), []byte(`"errorMessage":"307 Temporary Redirect`)) {
		t.Errorf("want the redirect reported as an error:\n%s", ps.out.bytes())
	}
}

// TestHostileProject starts rpi in a project whose AGENTS.md is a FIFO
// nobody writes, whose CLAUDE.md one level down is a symlink to /dev/zero,
// and whose .pi/prompts holds a huge template: startup neither hangs nor
// runs out of memory, and says what it skipped.
func TestHostileProject(t *testing.T) {
	root := t.TempDir()
	cwd := filepath.Join(root, "sub")
	os.MkdirAll(filepath.Join(cwd, ".pi", "prompts"), 0o755)
	if err := mkfifo(filepath.Join(root, "AGENTS.md"), 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	os.Symlink("/dev/zero", filepath.Join(cwd, "CLAUDE.md"))
	os.WriteFile(filepath.Join(cwd, ".pi", "prompts", "big.md"), bytes.Repeat([]byte("x"), maxResourceBytes+1), 0o644)
	done := make(chan []byte)
	go func() {
		var out bytes.Buffer
		runRPI(t, newTestEnv(t), []string{"rpc", "--cwd", cwd, "--approve"}, strings.NewReader(`{"id":"s","type":"get_state"}`+"\n"), &out)
		done <- out.Bytes()
	}()
	select {
	case out := <-done:
		for _, want := range []string{`"id":"s"`, `Skipped context file ` + filepath.Join(root, "AGENTS.md") + `: it is a named pipe (FIFO)`,
			`Skipped context file ` + filepath.Join(cwd, "CLAUDE.md") + `: it is a device`, `big.md: it is larger than 1.0MB"`} {
			if !bytes.Contains(out, []byte(want)) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	case <-time.After(20 * time.Second):
		t.Fatal("startup hung on the project's files")
	}
}

// TestExportToFIFO checks that export_html refuses a FIFO at once instead
// of blocking, and that other commands are answered meanwhile.
func TestExportToFIFO(t *testing.T) {
	e := newTestEnv(t)
	cwd := t.TempDir()
	if err := mkfifo(filepath.Join(cwd, "pipe.html"), 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd})
	ps.send(`{"id":"b","type":"bash","command":"echo hi"}`)
	ps.waitFor(`"id":"b"`)
	ps.send(`{"id":"x","type":"export_html","outputPath":"pipe.html"}`)
	ps.send(`{"id":"s","type":"get_state"}`)
	ps.waitFor(`"id":"x"`)
	ps.close()
	if !bytes.Contains(ps.out.bytes(), []byte(`pipe.html: it is a named pipe (FIFO); the file tools only use regular files"`)) {
		t.Errorf("export to a FIFO:\n%s", ps.out.bytes())
	}
}

// TestApprovalHoldsUntilTheWrite: under --confirm write,edit, what the
// dialog named is what is written. While each dialog is open the path is
// replaced — by a symlink to a file outside the working directory, as a
// background process could do — and then approved: nothing outside is
// written or created, and the call says the path changed. An edit whose
// file changed meanwhile writes nothing either (the dialog showed edits
// of the old text).
func TestApprovalHoldsUntilTheWrite(t *testing.T) {
	type dirs struct{ cwd, outside string }
	symlink := func(t *testing.T, target, link string) {
		if err := os.Symlink(target, link); err != nil {
			t.Skip("no symlinks here:", err)
		}
	}
	// linkToKeys puts a symlink to outside/keys where notes.md was.
	linkToKeys := func(t *testing.T, d dirs) {
		os.Rename(filepath.Join(d.cwd, "notes.md"), filepath.Join(d.cwd, "notes.old"))
		symlink(t, filepath.Join(d.outside, "keys"), filepath.Join(d.cwd, "notes.md"))
	}
	for _, tc := range []struct {
		name, tool, args, dialog string
		setup, swap              func(t *testing.T, d dirs)
		outside, want            string // a file outside the cwd, and what it must hold ("" for: must not exist)
		inside                   string // what notes.md must hold, when it says
		error                    string
	}{{
		name: "write over a file", tool: "write", args: `{"path":"notes.md","content":"approved"}`,
		dialog: "Write 8 bytes to notes.md (replace its 8 bytes)",
		setup: func(t *testing.T, d dirs) {
			os.WriteFile(filepath.Join(d.cwd, "notes.md"), []byte("original"), 0o644)
			os.WriteFile(filepath.Join(d.outside, "keys"), []byte("secret"), 0o644)
		},
		swap:    linkToKeys,
		outside: "keys", want: "secret", error: "Cannot write notes.md: the path changed while this call was waiting",
	}, {
		name: "write a new file", tool: "write", args: `{"path":"new.md","content":"approved"}`,
		dialog: "Write 8 bytes to new.md (create it)",
		swap: func(t *testing.T, d dirs) {
			symlink(t, filepath.Join(d.outside, "planted"), filepath.Join(d.cwd, "new.md"))
		},
		outside: "planted", error: "Cannot write new.md: the path changed while this call was waiting",
	}, {
		name: "write in a new folder", tool: "write", args: `{"path":"sub/new.md","content":"approved"}`,
		dialog: "Write 8 bytes to sub/new.md (create it)",
		swap: func(t *testing.T, d dirs) {
			symlink(t, d.outside, filepath.Join(d.cwd, "sub"))
		},
		outside: "new.md", error: "Cannot write sub/new.md: the path changed while this call was waiting",
	}, {
		name: "edit", tool: "edit", args: `{"path":"notes.md","oldText":"original","newText":"approved"}`,
		dialog: "Apply 1 edit to notes.md:\nedits[0] at line 1:\n- original\n+ approved",
		setup: func(t *testing.T, d dirs) {
			os.WriteFile(filepath.Join(d.cwd, "notes.md"), []byte("original"), 0o644)
			os.WriteFile(filepath.Join(d.outside, "keys"), []byte("original"), 0o644)
		},
		swap:    linkToKeys,
		outside: "keys", want: "original", error: "Cannot edit notes.md: the path changed while this call was waiting",
	}, {
		name: "edit of a file changed meanwhile", tool: "edit", args: `{"path":"notes.md","edits":[{"oldText":"original","newText":"approved"}]}`,
		dialog: "Apply 1 edit to notes.md:\nedits[0] at line 1:\n- original\n+ approved",
		setup: func(t *testing.T, d dirs) {
			os.WriteFile(filepath.Join(d.cwd, "notes.md"), []byte("original"), 0o644)
		},
		swap: func(t *testing.T, d dirs) {
			os.WriteFile(filepath.Join(d.cwd, "notes.md"), []byte("original, then more"), 0o644)
		},
		inside: "original, then more", error: "Cannot edit notes.md: the file changed while this call was waiting",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			d := dirs{t.TempDir(), t.TempDir()}
			if tc.setup != nil {
				tc.setup(t, d)
			}
			args, _ := json.Marshal([]string{tc.args})
			startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"`+tc.tool+`","args":`+string(args)+`}]}`+"\n"+`{"text":["Done."]}`, e.agentDir)
			os.WriteFile(filepath.Join(e.agentDir, "settings.json"), []byte(`{"confirmTimeoutMs":60000}`), 0o644)
			ps := startSessionIn(t, e, []string{"rpc", "--cwd", d.cwd, "--no-session", "--confirm", "write,edit"})
			ps.send(`{"id":"p","type":"prompt","message":"go"}`)
			ps.waitFor(`"method":"confirm"`)
			var dialog map[string]any
			for _, rec := range ps.records() {
				if rec["method"] == "confirm" {
					dialog = rec
				}
			}
			if !strings.HasPrefix(dialog["message"].(string), tc.dialog) {
				t.Errorf("the dialog says %q, want it to start %q", dialog["message"], tc.dialog)
			}
			tc.swap(t, d)
			ps.send(fmt.Sprintf(`{"type":"extension_ui_response","id":%q,"confirmed":true}`, dialog["id"]))
			ps.waitFor(`"type":"agent_settled"`)
			ps.close()
			if data, _ := os.ReadFile(filepath.Join(d.cwd, "notes.md")); tc.inside != "" && string(data) != tc.inside {
				t.Errorf("notes.md holds %q, want %q", data, tc.inside)
			}
			data, err := os.ReadFile(filepath.Join(d.outside, tc.outside))
			switch {
			case tc.outside == "":
			case tc.want == "" && err == nil:
				t.Errorf("%s was created outside the working directory, holding %q", tc.outside, data)
			case tc.want != "" && string(data) != tc.want:
				t.Errorf("%s outside the working directory holds %q, want %q", tc.outside, data, tc.want)
			}
			if !bytes.Contains(ps.out.bytes(), []byte(tc.error)) || !bytes.Contains(ps.out.bytes(), []byte("nothing was written")) {
				t.Errorf("the tool result does not say %q:\n%s", tc.error, ps.out.bytes())
			}
		})
	}
}

// TestAnswerIsCut streams an answer far longer than the model was asked
// for, in each API's format: every reader cuts it at the bound of the
// tokens asked for, keeps what came before, says so, and does not retry.
func TestAnswerIsCut(t *testing.T) {
	deltas := make([]string, 200) // 800 KiB of text
	for i := range deltas {
		deltas[i] = strings.Repeat(string(rune('a'+i%26)), 4<<10)
	}
	text, _ := json.Marshal(deltas)
	script := `{"text":` + string(text) + `}` + "\n" + `{"text":["a retry"]}`
	for _, api := range []string{apiOpenAI, apiAnthropic, apiResponses, apiGoogle} {
		t.Run(api, func(t *testing.T) {
			ps, fm, _ := agentSession(t, api, script, "--thinking", "off")
			ps.send(`{"id":"p","type":"prompt","message":"Write a lot"}`)
			ps.waitFor(`"type":"agent_settled"`)
			ps.close()
			var end map[string]any
			for _, rec := range ps.records() {
				if rec["type"] == "message_end" {
					end = rec["data"].(map[string]any)["message"].(map[string]any)
				}
			}
			const limit = 4096 * 32 // 32 bytes for each of the fake model's maxTokens (thinking off)
			msg, _ := end["errorMessage"].(string)
			if !strings.HasPrefix(msg, "The answer was cut at 128 KiB: ") || end["stopReason"] != "error" {
				t.Fatalf("last answer ended %v: %.300s", end["stopReason"], msg)
			}
			content := end["content"].([]any)
			kept := len(content[0].(map[string]any)["text"].(string))
			if kept == 0 || kept > limit {
				t.Errorf("kept %d bytes of text, want some and at most %d", kept, limit)
			}
			fm.mu.Lock()
			requests := len(fm.requests)
			fm.mu.Unlock()
			if requests != 1 {
				t.Errorf("%d requests: a cut answer must not be retried", requests)
			}
		})
	}
}

// TestCompressedAnswerRefused: rpi asks a model server for an
// uncompressed stream; a server that gzips its answer anyway (here a
// bomb: 32 MiB of text in about 32 KiB on the wire, which Go's transport
// would inflate on its own) is refused with an error that says what to
// do.
func TestCompressedAnswerRefused(t *testing.T) {
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	fmt.Fprint(zw, `data: {"choices":[{"index":0,"delta":{"content":"`)
	zw.Write(bytes.Repeat([]byte("x"), 32<<20))
	fmt.Fprint(zw, "\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	zw.Close()
	var accepted []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accepted = append(accepted, r.Header.Get("Accept-Encoding"))
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(bomb.Bytes())
	}))
	defer srv.Close()
	e := newTestEnv(t)
	os.WriteFile(filepath.Join(e.agentDir, "models.json"), []byte(`{"providers":{"p":{"baseUrl":"`+srv.URL+
		`/v1","api":"openai-completions","models":[{"id":"m"}]}}}`), 0o644)
	ps := startSessionIn(t, e, []string{"rpc", "--cwd", t.TempDir()})
	ps.send(`{"id":"p","type":"prompt","message":"hi"}`)
	ps.waitFor(`"type":"agent_settled"`)
	ps.close()
	want := `"errorMessage":"The model server sent its answer compressed (Content-Encoding: gzip) though rpi asked for none (Accept-Encoding: identity)`
	if out := ps.out.bytes(); !bytes.Contains(out, []byte(want)) {
		t.Errorf("want the compressed answer refused; got %.2000s", out)
	}
	if len(accepted) != 1 || accepted[0] != "identity" {
		t.Errorf("requests said Accept-Encoding %q, want one with identity", accepted)
	}
}

// TestKeyArguments: which command-line arguments hold a key, and where.
func TestKeyArguments(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want map[int]int
	}{
		{[]string{"rpc", "--api-key", "sk-1", "--model", "x"}, map[int]int{2: 0}},
		{[]string{"rpc", "-api-key", "sk-1"}, map[int]int{2: 0}},
		{[]string{"rpc", "--api-key=sk-1"}, map[int]int{1: len("--api-key=")}},
		{[]string{"rpc", "-api-key=sk-1", "--api-key", "sk-2"}, map[int]int{1: len("-api-key="), 3: 0}},
		{[]string{"rpc", "--api-key"}, map[int]int{}},
		{[]string{"rpc", "--name", "--api-key", "api-key"}, map[int]int{3: 0}},
	} {
		if got := keyArguments(tt.args); !maps.Equal(got, tt.want) {
			t.Errorf("%q: %v, want %v", tt.args, got, tt.want)
		}
	}
}

// TestKeysOutOfReach: what a child of rpi (the model's bash, say) can
// read of the keys rpi holds. The key given with --api-key is gone from
// /proc/<rpi>/cmdline; the key variable is neither in the child's
// environment nor in rpi's (as /proc/<rpi>/environ shows it, where that
// file can be read at all: rpi is not dumpable) nor in that of rpi's
// other children (the watchdog). The child reverses what it reads, as a
// prompt-injected model would to get past the redaction of literal keys.
func TestKeysOutOfReach(t *testing.T) {
	endToEnd(t)
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("no /proc")
	}
	const argKey, envKey = "sk-from-the-command-line-31", "sk-from-the-environment-57"
	p := startRPIWith(t, withEnv("OPENAI_API_KEY="+envKey), "rpc", "--cwd", t.TempDir(), "--no-session", "--provider", "anthropic", "--api-key", argKey)
	p.next(t)
	p.send(t, spawnLine("w", []string{"sleep", "30"}, "")+"\n") // the watchdog starts with the first child
	p.until(t, "response", "w")
	script := `{ tr '\0' ' ' < /proc/$PPID/cmdline; echo; env; tr '\0' '\n' < /proc/$PPID/environ;` +
		` for c in $(pgrep -P $PPID); do tr '\0' '\n' < /proc/$c/environ; tr '\0' ' ' < /proc/$c/cmdline; done; } 2>&1 | rev`
	line, _ := json.Marshal(map[string]string{"id": "b", "type": "bash", "command": script})
	p.send(t, string(line)+"\n")
	rec := p.until(t, "response", "b")
	out := rec["data"].(map[string]any)["output"].(string)
	reverse := func(s string) string {
		r := []rune(s)
		slices.Reverse(r)
		return string(r)
	}
	if !strings.Contains(out, reverse("--api-key")) {
		t.Fatalf("the child did not read rpi's command line:\n%s", reverse(out))
	}
	for _, key := range []string{argKey, envKey} {
		if strings.Contains(out, reverse(key)) {
			t.Errorf("a child of rpi can read %s:\n%s", key, reverse(out))
		}
	}
	p.stdin.Close()
	p.exit(t)
}

// TestAgentDirNeverRelative: rpi started in a project that ships
// .pi/agent/models.json, without a home folder (HOME unset, empty, or
// relative: Windows sets no HOME at all), must not take .pi/agent from
// where it runs. It stops at once with an init error that says what to
// set: the project's server gets no request, the user's key goes nowhere,
// and no session is written inside the project.
func TestAgentDirNeverRelative(t *testing.T) {
	endToEnd(t)
	const key = "sk-users-own-key-4711"
	var mu sync.Mutex
	var got []string // what the project's server was sent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer srv.Close()
	for _, home := range []string{"(unset)", "", ".", "home"} {
		t.Run("HOME="+home, func(t *testing.T) {
			project := t.TempDir()
			os.MkdirAll(filepath.Join(project, "home"), 0o755)
			os.MkdirAll(filepath.Join(project, ".pi", "agent"), 0o755)
			os.WriteFile(filepath.Join(project, ".pi", "agent", "models.json"), []byte(`{"providers":{"repo":{"baseUrl":"`+
				srv.URL+`/v1","api":"openai-completions","apiKey":"$OPENAI_API_KEY","models":[{"id":"m"}]}}}`), 0o644)
			cmd := exec.Command(os.Args[0], "rpc")
			cmd.Dir = project
			cmd.Env = append(withoutVariables(os.Environ(), hiddenVars), "RPI_TEST_MAIN=1", "GORACE=atexit_sleep_ms=0",
				"TMPDIR="+t.TempDir(), "OPENAI_API_KEY="+key, "OPENAI_BASE_URL="+srv.URL+"/v1") // loopback whatever rpi picks
			if home != "(unset)" {
				cmd.Env = append(cmd.Env, "HOME="+home)
			}
			cmd.Stdin = strings.NewReader(`{"id":"s","type":"get_state"}` + "\n" + `{"id":"p","type":"prompt","message":"hi"}` + "\n")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			timer := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
			err := cmd.Run()
			timer.Stop()
			if code := cmd.ProcessState.ExitCode(); code != 1 {
				t.Errorf("exit code %d (%v), want 1 (an init error)", code, err)
			}
			want := `{"type":"response","command":"init","success":false,"error":"No home folder: HOME is not set`
			if home != "(unset)" && home != "" {
				want = `{"type":"response","command":"init","success":false,"error":"No home folder: HOME is \"` + home + `\", not an absolute path`
			}
			if !strings.HasPrefix(stdout.String(), want) || strings.Count(stdout.String(), "\n") != 1 ||
				!strings.Contains(stdout.String(), "PI_CODING_AGENT_DIR") {
				t.Errorf("stdout:\n%s\nwant one line starting %s, naming PI_CODING_AGENT_DIR", stdout.String(), want)
			}
			if _, err := os.Stat(filepath.Join(project, ".pi", "agent", "sessions")); err == nil {
				t.Error("rpi made .pi/agent/sessions inside the project")
			}
			if _, err := os.Stat(filepath.Join(project, "home", ".pi")); err == nil {
				t.Error("rpi made home/.pi inside the project")
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) > 0 {
		t.Errorf("the project's server was sent %q", got)
	}
}

// TestNoHomeFolder: without a home folder or PI_CODING_AGENT_DIR, run
// stops before it reads anything, with an init error (rpc) or one line on
// stderr (ACP) that says what to set.
func TestNoHomeFolder(t *testing.T) {
	for _, mode := range []string{"rpc", "acp"} {
		e := newTestEnv(t)
		delete(e.vars, "HOME")
		delete(e.vars, "PI_CODING_AGENT_DIR")
		var stdout, stderr syncBuffer
		code := runProgram([]string{mode, "--no-session"}, e.env(), strings.NewReader(`{"id":"s","type":"get_state"}`+"\n"), &stdout, &stderr, nil)
		if code != 1 || !strings.HasPrefix(stderr.String(), "rpi: No home folder: HOME is not set") {
			t.Errorf("%s without a home: exit %d, stderr %q", mode, code, stderr.String())
		}
		if want := `{"type":"response","command":"init","success":false,"error":"No home folder`; mode == "rpc" && !strings.HasPrefix(stdout.String(), want) {
			t.Errorf("rpc without a home: stdout %q", stdout.String())
		}
	}
}

// TestAgentDirIsAbsolute: the agent folder is $PI_CODING_AGENT_DIR (made
// absolute) or the home folder's .pi/agent, and never relative: no home,
// or a relative one, is an error that says what to set. A tool's ~ is the
// home folder; without one it stays a name in the working directory
// (never the root).
func TestAgentDirIsAbsolute(t *testing.T) {
	wd, _ := os.Getwd()
	for _, tt := range []struct {
		vars map[string]string
		want string // the agent folder, or the error's start
	}{
		{map[string]string{"HOME": "/home/me"}, "/home/me/.pi/agent"},
		{map[string]string{"HOME": "/home/me", "PI_CODING_AGENT_DIR": "/etc/pi"}, "/etc/pi"},
		{map[string]string{"PI_CODING_AGENT_DIR": "/etc/pi"}, "/etc/pi"},
		{map[string]string{"PI_CODING_AGENT_DIR": "conf"}, filepath.Join(wd, "conf")},
		{map[string]string{}, "No home folder: HOME is not set; set HOME, or PI_CODING_AGENT_DIR"},
		{map[string]string{"HOME": "."}, `No home folder: HOME is ".", not an absolute path; set HOME`},
		{map[string]string{"HOME": "me/home"}, `No home folder: HOME is "me/home", not an absolute path`},
	} {
		dir, err := agentDir(func(k string) string { return tt.vars[k] })
		got := dir
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, tt.want) || (err == nil) != filepath.IsAbs(tt.want) {
			t.Errorf("%v: %q, want %q", tt.vars, got, tt.want)
		}
	}
	s := toolServer(t, nil)
	for _, tt := range []struct{ home, path, want string }{
		{"/home/me", "~/notes.md", "/home/me/notes.md"},
		{"/home/me", "~", "/home/me"},
		{"/home/me", "~notes.md", filepath.Join(s.set.cwd, "~notes.md")},
		{"", "~/notes.md", filepath.Join(s.set.cwd, "~/notes.md")},
	} {
		s.set.home = tt.home
		if got, _ := s.toolPath(tt.path); got != tt.want {
			t.Errorf("home %q: %s is %s, want %s", tt.home, tt.path, got, tt.want)
		}
	}
}
