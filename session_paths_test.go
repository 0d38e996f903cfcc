package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionPathsTildeAsPi1_6: a leading ~ in switch_session's
// sessionPath, in --session FILE, --fork FILE and --session-dir is the
// home folder, as pi 1.6's resolvePath takes it; rpi took it for a
// folder named "~" in the working directory.
func TestSessionPathsTildeAsPi1_6(t *testing.T) {
	e := newTestEnv(t)
	cwd := t.TempDir()
	header := func(id string) []byte {
		return []byte(`{"type":"session","version":3,"id":"` + id + `","timestamp":"2026-03-16T09:00:00.000Z","cwd":"` + cwd + `"}` + "\n" +
			`{"type":"message","id":"a0000001","parentId":null,"timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}` + "\n")
	}
	os.WriteFile(filepath.Join(e.home, "s.jsonl"), header("1a2b3c4d-0000-4000-8000-0000000000aa"), 0o644)
	os.Mkdir(filepath.Join(e.home, "sd"), 0o755)
	os.WriteFile(filepath.Join(e.home, "sd", "t.jsonl"), header("1a2b3c4d-0000-4000-8000-0000000000bb"), 0o644)

	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd})
	ps.send(`{"id":"sw","type":"switch_session","sessionPath":"~/s.jsonl"}`)
	ps.waitFor(`"id":"sw"`)
	ps.close()
	if out := string(ps.out.bytes()); !strings.Contains(out, `"id":"sw","type":"response","command":"switch_session","success":true`) {
		t.Errorf("switch_session ~/s.jsonl:\n%s", out)
	}

	for _, args := range [][]string{{"--session", "~/s.jsonl"}, {"--fork", "~/s.jsonl"}} {
		var out syncBuffer
		runRPI(t, e, append([]string{"rpc", "--cwd", cwd}, args...), strings.NewReader(`{"id":"m","type":"get_messages"}`+"\n"), &out)
		if out := out.String(); !strings.Contains(out, `"text":"hi"`) {
			t.Errorf("%s did not open the home folder's file:\n%.2000s", args, out)
		}
	}

	var out syncBuffer
	runRPI(t, e, []string{"rpc", "--cwd", cwd, "--session-dir", "~/sd"}, strings.NewReader(`{"id":"l","type":"session_list","scope":"all_projects"}`+"\n"), &out)
	if out := out.String(); !strings.Contains(out, `0000000000bb`) {
		t.Errorf("--session-dir ~/sd did not list the home folder's sd:\n%.2000s", out)
	}
	if _, err := os.Lstat(filepath.Join(cwd, "~")); err == nil {
		t.Errorf("a folder named ~ was made in the working directory")
	}
}

// TestDefaultSessionDirAsPi1_6: a working directory's session folder is
// named as pi 1.6's getDefaultSessionDirPath names it, which drops one
// leading / or \ only: a Windows UNC path (\\server\share\proj) keeps a
// '-' for its second backslash, so that rpi and pi keep that
// directory's sessions in one folder. rpi dropped every leading slash.
func TestDefaultSessionDirAsPi1_6(t *testing.T) {
	for cwd, want := range map[string]string{
		"/home/me/project":    "--home-me-project--",
		`\\server\share\proj`: "---server-share-proj--",
		`C:\Users\me`:         "--C--Users-me--",
		"/srv/a:b":            "--srv-a-b--",
	} {
		if got := filepath.Base(defaultSessionDir("/agent", cwd)); got != want {
			t.Errorf("the session folder of %s is %s, want %s (pi 1.6's)", cwd, got, want)
		}
	}
}

// TestSessionIDByHeaderAsPi1_6: --session-id ID opens the cwd's session
// whose header has that id, as pi 1.6's findById finds it, whatever its
// file is named. rpi went by the name "<time>_ID.jsonl": it opened a
// file of that name holding another session (whose id it then reported),
// and missed the session with that id in a file named otherwise,
// starting a second session with the same id beside it.
func TestSessionIDByHeaderAsPi1_6(t *testing.T) {
	e, cwd := newTestEnv(t), t.TempDir()
	dir := defaultSessionDir(e.agentDir, cwd)
	os.MkdirAll(dir, 0o755)
	session := func(id, text string) []byte {
		return []byte(`{"type":"session","version":3,"id":"` + id + `","timestamp":"2026-03-16T09:00:00.000Z","cwd":"` + cwd + `"}` + "\n" +
			`{"type":"message","id":"a0000001","parentId":null,"timestamp":"2026-03-16T09:00:01.000Z","message":{"role":"user","content":"` + text + `","timestamp":1}}` + "\n")
	}
	os.WriteFile(filepath.Join(dir, "2026-03-16T09-00-00-000Z_wanted.jsonl"), session("impostor", "not this one"), 0o644)
	renamed := filepath.Join(dir, "renamed.jsonl")
	os.WriteFile(renamed, session("wanted", "this one"), 0o644)
	var out syncBuffer
	runRPI(t, e, []string{"rpc", "--cwd", cwd, "--session-id", "wanted"}, strings.NewReader(`{"id":"s","type":"get_state"}`+"\n"+`{"id":"m","type":"get_messages"}`+"\n"), &out)
	got := out.String()
	if !strings.Contains(got, `"sessionId":"wanted"`) || !strings.Contains(got, `"text":"this one"`) || !strings.Contains(got, `"sessionFile":"`+renamed+`"`) {
		t.Errorf("--session-id wanted did not open %s:\n%.3000s", renamed, got)
	}
}
