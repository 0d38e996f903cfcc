package main

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestSessionDirSetting: where sessions go without --session-dir, as pi
// 1.6 decides it: PI_CODING_AGENT_SESSION_DIR, else settings.json's
// sessionDir, the project's (only with --approve) over the user's; ~ is
// the home folder and a relative path is the working directory's. A
// settings.json that cannot be used gives none (loadSettings warns).
func TestSessionDirSetting(t *testing.T) {
	for _, c := range []struct {
		name           string
		env, user, pro string // PI_CODING_AGENT_SESSION_DIR, the user's and the project's settings.json ("": none)
		approve        bool
		noHome         bool
		want           string // $HOME and $CWD stand for the folders
		notice         string
	}{
		{name: "none", want: ""},
		{name: "user tilde", user: `{"sessionDir":"~/s"}`, want: "$HOME/s"},
		{name: "user tilde alone", user: `{"sessionDir":"~"}`, want: "$HOME"},
		{name: "user relative", user: `{"sessionDir":"s/t"}`, want: "$CWD/s/t"},
		{name: "tilde of another user is a name", user: `{"sessionDir":"~bob/s"}`, want: "$CWD/~bob/s"},
		{name: "project without approve", user: `{"sessionDir":"~/s"}`, pro: `{"sessionDir":"p"}`, want: "$HOME/s"},
		{name: "project with approve", user: `{"sessionDir":"~/s"}`, pro: `{"sessionDir":"p"}`, approve: true, want: "$CWD/p"},
		{name: "project without the key", user: `{"sessionDir":"~/s"}`, pro: `{}`, approve: true, want: "$HOME/s"},
		{name: "broken project file", user: `{"sessionDir":"~/s"}`, pro: `{"sessionDir":`, approve: true, want: "$HOME/s"},
		{name: "broken user file", user: `{"sessionDir":"~/s",}`, want: ""},
		{name: "variable over settings", env: "~/e", user: `{"sessionDir":"~/s"}`, pro: `{"sessionDir":"p"}`, approve: true, want: "$HOME/e"},
		{name: "variable without home", env: "~/e", noHome: true, want: "",
			notice: `Ignored PI_CODING_AGENT_SESSION_DIR "~/e": there is no home folder for its ~`},
		{name: "no home", user: `{"sessionDir":"~/s"}`, noHome: true, want: "",
			notice: `Ignored sessionDir "~/s" in $AGENT/settings.json: there is no home folder for its ~`},
	} {
		t.Run(c.name, func(t *testing.T) {
			home, cwd, agent := t.TempDir(), t.TempDir(), t.TempDir()
			if c.user != "" {
				os.WriteFile(filepath.Join(agent, "settings.json"), []byte(c.user), 0o600)
			}
			if c.pro != "" {
				os.Mkdir(filepath.Join(cwd, ".pi"), 0o700)
				os.WriteFile(filepath.Join(cwd, ".pi", "settings.json"), []byte(c.pro), 0o600)
			}
			if c.noHome {
				home = ""
			}
			getenv := func(k string) string {
				if k == "PI_CODING_AGENT_SESSION_DIR" {
					return c.env
				}
				return ""
			}
			user, userPath := hostUserSettings(agent)
			got, notices := sessionDirSetting(cliConfig{cwd: cwd}, user, userPath, home, getenv, c.approve)
			r := strings.NewReplacer("$HOME", home, "$CWD", cwd, "$AGENT", agent, "/", string(filepath.Separator))
			want := r.Replace(c.want)
			if got != want {
				t.Errorf("dir %q, want %q", got, want)
			}
			if wantNotice := strings.NewReplacer("$AGENT", agent).Replace(c.notice); c.notice == "" && len(notices) > 0 || c.notice != "" && !slices.Equal(notices, []string{wantNotice}) {
				t.Errorf("notices %q, want %q", notices, wantNotice)
			}
		})
	}
}

// TestWithoutVariablesCase: on Windows, where a variable's name has no
// case (os.Getenv("ANTHROPIC_API_KEY") reads anthropic_api_key), a key's
// variable is kept from children whatever its case, as are the agent
// markers rpi replaces; elsewhere only the name spelled as it is.
func TestWithoutVariablesCase(t *testing.T) {
	environ := []string{"anthropic_api_key=sk-1", "Ai_Agent=pi", "PATH=/bin"}
	got := withAgentMarkers(withoutVariables(environ, []string{"ANTHROPIC_API_KEY"}))
	want := []string{"anthropic_api_key=sk-1", "Ai_Agent=pi", "PATH=/bin", "AI_AGENT=rpi", "PI_CODING_AGENT=true"}
	if runtime.GOOS == "windows" {
		want = []string{"PATH=/bin", "AI_AGENT=rpi", "PI_CODING_AGENT=true"}
	}
	if !slices.Equal(got, want) {
		t.Errorf("children's environment %q, want %q", got, want)
	}
}
