package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestDecideTrust reads trust.json as pi 1.6 reads it: the closest
// folder's true or false decides (null passes to the folder above), keys
// compare cleaned but not resolved, the working directory is taken with
// its symlinks resolved (so a symlink to a trusted folder is trusted, and
// a decision for the symlink's own path is not one for its folder), and a
// file that cannot be used trusts nothing, with a warning.
func TestDecideTrust(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(root, "work", "project")
	os.MkdirAll(project, 0o755)
	link := filepath.Join(root, "link")
	symlinks := os.Symlink(project, link) == nil
	q := func(path string) string { return strings.ReplaceAll(path, `\`, `\\`) }
	for _, c := range []struct {
		name, file, cwd, defaultTrust string
		needsLink                     bool
		trusted                       bool
		notice                        string // its start
	}{
		{name: "no file, ask", cwd: project, defaultTrust: "ask"},
		{name: "no file, always", cwd: project, defaultTrust: "always", trusted: true},
		{name: "no file, never", cwd: project, defaultTrust: "never"},
		{name: "the folder", file: `{"` + q(project) + `": true}`, cwd: project, defaultTrust: "ask", trusted: true},
		{name: "a saved false over always", file: `{"` + q(project) + `": false}`, cwd: project, defaultTrust: "always"},
		{name: "no decision here: the default", file: `{"` + q(filepath.Join(project, "sub")) + `": true}`, cwd: project, defaultTrust: "always", trusted: true},
		{name: "the grandparent", file: `{"` + q(root) + `": true}`, cwd: project, defaultTrust: "ask", trusted: true},
		{name: "null passes up", file: `{"` + q(project) + `": null, "` + q(root) + `": true}`, cwd: project, defaultTrust: "ask", trusted: true},
		{name: "closer false", file: `{"` + q(root) + `": true, "` + q(filepath.Join(root, "work")) + `": false}`, cwd: project, defaultTrust: "ask"},
		{name: "a key cleaned", file: `{"` + q(project+string(filepath.Separator)+".") + `": true}`, cwd: project, defaultTrust: "ask", trusted: true},
		{name: "a relative key decides nothing", file: `{"project": true}`, cwd: project, defaultTrust: "ask"},
		{name: "a key twice: the last value", file: `{"` + q(project) + `": true, "` + q(project) + `": false}`, cwd: project, defaultTrust: "always"},
		{name: "a BOM", file: "\ufeff" + `{"` + q(project) + `": true}`, cwd: project, defaultTrust: "ask", trusted: true},
		{name: "a symlink to a trusted folder", file: `{"` + q(project) + `": true}`, cwd: link, needsLink: true, defaultTrust: "ask", trusted: true},
		{name: "a symlink's own path", file: `{"` + q(link) + `": true}`, cwd: link, needsLink: true, defaultTrust: "ask"},
		{name: "not an object", file: `[]`, cwd: project, defaultTrust: "always", notice: "Ignored $AGENT/trust.json: it must hold one JSON object"},
		{name: "null", file: `null`, cwd: project, defaultTrust: "always", notice: "Ignored $AGENT/trust.json: it must hold one JSON object"},
		{name: "a string value", file: `{"` + q(root) + `": "yes"}`, cwd: project, defaultTrust: "always", notice: "Ignored $AGENT/trust.json: the value for "},
		{name: "broken JSON", file: `{"` + q(project) + `": true`, cwd: project, defaultTrust: "always", notice: "Ignored $AGENT/trust.json: it is not valid JSON"},
		{name: "more after the object", file: `{} {}`, cwd: project, defaultTrust: "always", notice: "Ignored $AGENT/trust.json: it is not valid JSON (more after its object)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.needsLink && !symlinks {
				t.Skip("no symlinks here")
			}
			agent := t.TempDir()
			path := filepath.Join(agent, "trust.json")
			if c.file != "" {
				os.WriteFile(path, []byte(c.file), 0o600)
			}
			d := decideTrust(path, c.cwd, c.defaultTrust)
			if d.trusted != c.trusted {
				t.Errorf("trusted %v, want %v (notice %q)", d.trusted, c.trusted, d.notice)
			}
			want := strings.ReplaceAll(c.notice, "$AGENT", agent)
			if c.notice == "" && d.notice != "" || !strings.HasPrefix(d.notice, want) {
				t.Errorf("notice %q, want it to start %q", d.notice, want)
			}
		})
	}
	t.Run("a folder in its place", func(t *testing.T) {
		agent := t.TempDir()
		os.Mkdir(filepath.Join(agent, "trust.json"), 0o700)
		if d := decideTrust(filepath.Join(agent, "trust.json"), project, "always"); d.trusted || !strings.HasPrefix(d.notice, "Ignored "+filepath.Join(agent, "trust.json")+": ") {
			t.Errorf("got %+v, want untrusted with a warning", d)
		}
	})
	if runtime.GOOS == "windows" {
		t.Run("case", func(t *testing.T) {
			agent := t.TempDir()
			path := filepath.Join(agent, "trust.json")
			os.WriteFile(path, []byte(`{"`+q(strings.ToUpper(project))+`": true}`), 0o600)
			if d := decideTrust(path, project, "ask"); !d.trusted {
				t.Errorf("got %+v, want trusted: Windows paths compare without case", d)
			}
		})
	}
}

// TestDefaultProjectTrust takes the user's defaultProjectTrust as pi
// does: "ask" unless "always" or "never", and a value pi does not know
// is "ask" with a warning.
func TestDefaultProjectTrust(t *testing.T) {
	for _, c := range []struct{ value, want, notice string }{
		{"", "ask", ""},
		{"always", "always", ""},
		{"never", "never", ""},
		{"ask", "ask", ""},
		{"yes", "ask", `Ignored defaultProjectTrust "yes" in /a/settings.json: it is "ask", "always" or "never"`},
	} {
		got, notice := defaultProjectTrust(settingsFile{DefaultProjectTrust: c.value}, "/a/settings.json")
		if got != c.want || notice != c.notice {
			t.Errorf("%q: got %q, %q; want %q, %q", c.value, got, notice, c.want, c.notice)
		}
	}
}
