package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mkfifo: Windows has no named pipes in its file system; the tests that
// need one skip.
func mkfifo(path string, mode uint32) error { return errors.ErrUnsupported }

// childrenStartAtDefaults: nothing to do; Windows passes no signal
// dispositions on to children.
func childrenStartAtDefaults() {}

// TestFindBashOnWindows: rpi runs Git for Windows' bash.exe, never WSL's
// System32\bash.exe nor the Microsoft Store's stub, even when they come
// first on PATH; it finds Git's from the git.exe on PATH (Git\cmd, all
// its installer puts there) or its install folders; without one, the
// error says to install Git for Windows. (Run under wine by
// scripts/windows-smoke.sh.)
func TestFindBashOnWindows(t *testing.T) {
	root := t.TempDir()
	file := func(parts ...string) string {
		path := filepath.Join(append([]string{root}, parts...)...)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte("MZ"), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	dir := func(parts ...string) string { return filepath.Join(append([]string{root}, parts...)...) }
	file("Windows", "System32", "bash.exe")
	file("Users", "me", "AppData", "Local", "Microsoft", "WindowsApps", "bash.exe")
	file("Program Files", "Git", "cmd", "git.exe")
	gitBash := file("Program Files", "Git", "bin", "bash.exe")
	msys := file("msys64", "usr", "bin", "bash.exe")
	userGit := file("Users", "me", "AppData", "Local", "Programs", "Git", "usr", "bin", "bash.exe")
	wsl, store := dir("Windows", "System32"), dir("Users", "me", "AppData", "Local", "Microsoft", "WindowsApps")
	path := func(dirs ...string) string { return strings.Join(dirs, string(os.PathListSeparator)) }
	for _, tt := range []struct {
		name string
		vars map[string]string
		want string // the bash, or the error's start
	}{
		{"only WSL's and the stub", map[string]string{"PATH": path(wsl, store)}, "no bash.exe found"},
		{"WSL's first, git.exe in Git\\cmd", map[string]string{"PATH": path(wsl, store, dir("Program Files", "Git", "cmd"))}, gitBash},
		{"System32 spelt otherwise", map[string]string{"PATH": path(strings.ToUpper(wsl)+`\`, dir("Program Files", "Git", "cmd"))}, gitBash},
		{"another bash on PATH", map[string]string{"PATH": path(wsl, dir("msys64", "usr", "bin"), dir("Program Files", "Git", "cmd"))}, msys},
		{"relative PATH entries", map[string]string{"PATH": path(`.`, `Program Files\Git\bin`)}, "no bash.exe found"},
		{"Git in Program Files", map[string]string{"PATH": wsl, "ProgramFiles": dir("Program Files")}, gitBash},
		{"Git for one user", map[string]string{"PATH": wsl, "LOCALAPPDATA": dir("Users", "me", "AppData", "Local")}, userGit},
	} {
		vars := tt.vars
		vars["SystemRoot"] = dir("Windows")
		got, err := findBash(func(k string) string { return vars[k] })
		if err != nil {
			got = err.Error()
			if !strings.Contains(got, "install Git for Windows") {
				t.Errorf("%s: the error does not say what to install: %s", tt.name, got)
			}
		}
		if !strings.HasPrefix(got, tt.want) {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestDangerousEnvOnWindows: Windows reads a variable's name in any case
// (Path is PATH), so the spawn dialog marks it in any case.
func TestDangerousEnvOnWindows(t *testing.T) {
	for _, key := range []string{"Path", "path", "Ld_Preload", "Git_Ssh_Command", "Ssh_Askpass", "Xdg_Config_Home"} {
		if !dangerousEnv(key) {
			t.Errorf("dangerousEnv(%q) = false, want true", key)
		}
	}
}
