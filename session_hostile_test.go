package main

// Session files from anywhere (a shared folder, a download, a
// repository) opened by rpi: what such a file, or what lies beside it,
// can make rpi do.

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClaimThroughASymlinkIsRefused: the claim a new session with a
// --session-id makes in a --session-dir (.ID.HASH.claim) is rpi's own
// file, opened with O_CREATE. A symlink planted at its name by someone
// who can write in that folder led rpi to make an empty file wherever it
// pointed, and to lock the file it named. Now the claim is refused, and
// nothing is made through it.
func TestClaimThroughASymlinkIsRefused(t *testing.T) {
	e := newTestEnv(t)
	cwd, elsewhere, sessions := t.TempDir(), t.TempDir(), t.TempDir()
	const id = "shared-session"
	sum := sha256.Sum256([]byte(cwd))
	claim := filepath.Join(sessions, "."+id+"."+hex.EncodeToString(sum[:8])+".claim")
	planted := filepath.Join(elsewhere, "made-through-the-link")
	if err := os.Symlink(planted, claim); err != nil {
		t.Skip("no symlinks here:", err)
	}
	var out strings.Builder
	code := runRPI(t, e, []string{"rpc", "--cwd", cwd, "--session-dir", sessions, "--session-id", id}, strings.NewReader(`{"id":"s","type":"get_state"}`+"\n"), &out)
	if _, err := os.Lstat(planted); err == nil {
		t.Errorf("a file was made where the planted claim %s leads", claim)
	}
	want := "Cannot claim session id '" + id + "' in " + sessions + ": " + claim + " is a symbolic link"
	if code == 0 || !strings.Contains(out.String(), want) {
		t.Errorf("exit %d, want an init error saying %q:\n%s", code, want, out.String())
	}
	if info, err := os.Lstat(claim); err != nil || info.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted link is not left as it was: %v", err)
	}
}
