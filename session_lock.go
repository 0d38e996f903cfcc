package main

// The locks of sessions: the one by which a session holds its file, and
// the claim by which a new session holds the id the user gave it until
// its file exists (docs/sessions.md, "One rpi per file").

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ---- The session file's lock ----

// Two rpi processes writing one session file would each chain entries
// to its own last one, and the other's would fall off the conversation.
// So a session holds its file: an advisory lock (flock on Unix, LockFileEx
// on Windows; tryLock in sys_*.go) on an open descriptor of the file,
// taken before the file is read and held while the session is current.
// Another rpi that opens the file waits up to sessionLockWait for it, then
// is refused. A session lets go of its file when it stops being current
// (once its writes are done) and when rpi shuts down, as soon as its last
// entry is written (conversation.close).

// sessionLockWait is how long opening a file another rpi holds waits for
// it: a client that hands a session from one process to the next (pi-acp's
// session/load stops the old one and starts the new one at once) must not
// be refused while the old one writes its last entry.
const sessionLockWait = 5 * time.Second

// lockSessionFile takes rpi's hold on the file at path, waiting up to wait
// (or until ctx ends) while another rpi has it, and returns the
// descriptor that holds it (nil when there is no file yet: it is held from
// when rpi creates it).
func lockSessionFile(ctx context.Context, path string, wait time.Duration) (*os.File, error) {
	deadline := time.Now().Add(wait)
	var f *os.File // the file at path, open while it is waited for
	for {
		if f == nil {
			var err error
			f, err = openLockable(path)
			if errors.Is(err, os.ErrNotExist) {
				return nil, nil
			}
			var nr *errNotRegular
			if errors.As(err, &nr) {
				return nil, &errInvalidSessionFile{path, nr.kind}
			}
			if err != nil {
				return nil, fmt.Errorf("Cannot read session file %s: %v", path, unwrapPathError(err))
			}
		}
		ok, err := tryLock(f)
		switch {
		case err != nil:
			f.Close()
			return nil, fmt.Errorf("Cannot lock session file %s: %v", path, err)
		case holdsFile(f, path) && ok:
			return f, nil
		case !holdsFile(f, path) || ok: // replaced meanwhile: the new one is opened next
			f.Close()
			f = nil
			continue
		case !time.Now().Before(deadline):
			f.Close()
			return nil, &errSessionInUse{path, wait}
		}
		// Another rpi has it: try again.
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			f.Close()
			// The holder may be this rpi too: a session it left and has
			// not yet written to the end, which the switch waited for.
			return nil, fmt.Errorf("Stopped waiting for session file %s, which is still held (by another rpi process, or by this one until it has written it): the session is closing", path)
		}
	}
}

// errSessionInUse refuses a session file another rpi holds, once it was
// waited for.
type errSessionInUse struct {
	path string
	wait time.Duration
}

func (e *errSessionInUse) Error() string {
	return fmt.Sprintf("Session file %s is in use by another rpi process, which did not let go of it within %v. "+
		"End that process (or close the session there) and try again; to work on a copy instead, start rpi with --fork %s.",
		e.path, e.wait, e.path)
}

// holdsFile reports whether lock holds the file now at path.
func holdsFile(lock *os.File, path string) bool {
	if lock == nil {
		return false
	}
	held, err := lock.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	return err == nil && os.SameFile(held, now)
}

// openSessionFile loads the session file at path, holding it (see
// lockSessionFile); unlock lets go of it. Waiting and reading stop when
// ctx ends.
func openSessionFile(ctx context.Context, path string, wait time.Duration) (*sessionFile, error) {
	ss, hold, err := openSessionFileOrEmpty(ctx, path, wait)
	if hold != nil {
		hold.Close()
	}
	return ss, err
}

// openSessionFileOrEmpty is openSessionFile for a file a new session may
// start in (--session): one found empty comes back with
// errEmptySessionFile and hold, the hold taken on it before it was read
// (nil when there was none to take), for that session to keep (its
// lock). Until its header is in the file, no other rpi opens the file
// or starts a session of its own there: let go of in between, the file
// could get two sessions' headers. The caller closes hold when it starts
// no session.
func openSessionFileOrEmpty(ctx context.Context, path string, wait time.Duration) (ss *sessionFile, hold *os.File, err error) {
	lock, err := lockSessionFile(ctx, path, wait)
	if err != nil {
		return nil, nil, err
	}
	ss, err = loadSessionFile(ctx, path)
	switch {
	case isEmptySessionFile(err):
		return nil, lock, err
	case err != nil:
		if lock != nil {
			lock.Close()
		}
		return nil, nil, err
	}
	ss.lock = lock // not shared yet: no lockMu needed
	return ss, nil, nil
}

// unlock lets go of the session's file: another rpi may open it then.
// lockMu is held, and no write of the session is under way.
func (ss *sessionFile) unlock() {
	if ss.lock != nil {
		ss.lock.Close()
		ss.lock = nil
	}
	ss.claim.release()
	ss.claim = nil
}

// ---- A new session's id ----

// Two rpis given one --session-id at once would each find no file with
// that id and each start a session with it, in two files (their names
// hold the time each started). So a new session with an id the user gave
// claims the id before it looks for the file: an advisory lock, as on a
// session file, on ".ID.claim" in the session folder (".ID.HASH.claim" in
// a --session-dir, HASH the cwd's: the same id is another session in
// another project there). It holds the claim until its file exists and
// is held (with its first message, as ever: the file is still written
// lazily), or until it stops being current; then it removes the claim's
// file, and the folders it made for it that are still empty. Another rpi
// claiming the id waits for it as for a held file (sessionLockWait), then
// looks for the file: it finds the first one's, or starts the session
// itself when the first ended without writing one; still claimed, it is
// refused.

// sessionClaim is a held claim on a session id.
type sessionClaim struct {
	f    *os.File
	dir  string // the session folder the claim's file is in
	made string // the top folder made for it ("" when none was)
}

// claimSessionID claims id in dir (see above) for a new session in cwd,
// shared when dir is a --session-dir, waiting up to wait (or until ctx
// ends) while another rpi has it.
func claimSessionID(ctx context.Context, dir, id, cwd string, shared bool, wait time.Duration) (*sessionClaim, error) {
	name := "." + id
	if shared {
		sum := sha256.Sum256([]byte(cwd))
		name += "." + hex.EncodeToString(sum[:8])
	}
	path := filepath.Join(dir, name+".claim")
	deadline := time.Now().Add(wait)
	c := &sessionClaim{dir: dir}
	for {
		// The claim is rpi's own file: a symlink at its name (planted by
		// whoever else may write in the folder) is not followed, lest the
		// file be made, or locked, where it leads.
		if info, err := os.Lstat(path); err == nil && info.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("Cannot claim session id '%s' in %s: %s is a symbolic link", id, dir, path)
		}
		f, err := openRegular(path, os.O_RDONLY|os.O_CREATE|noFollow, 0o600)
		if errors.Is(err, os.ErrNotExist) { // no folder yet, or one just removed
			made := firstMissing(dir)
			if err = os.MkdirAll(dir, 0o755); err == nil {
				if c.made == "" {
					c.made = made
				}
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("Cannot claim session id '%s' in %s: %v", id, dir, unwrapPathError(err))
		}
		ok, err := tryLock(f)
		switch {
		case err != nil:
			f.Close()
			return nil, fmt.Errorf("Cannot claim session id '%s' in %s: %v", id, dir, err)
		case ok && holdsFile(f, path):
			c.f = f
			return c, nil
		case ok || !holdsFile(f, path): // removed by the one that let go of it: made again next
			f.Close()
			continue
		case !time.Now().Before(deadline):
			f.Close()
			return nil, fmt.Errorf("Session id '%s' is being started by another rpi process, which has not written its file yet "+
				"and did not let go of the id within %v. End that process (or wait for its first message) and try again.", id, wait)
		}
		f.Close()
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return nil, fmt.Errorf("Stopped waiting for session id '%s', which another rpi process is starting: the session is closing", id)
		}
	}
}

// firstMissing is the topmost folder of dir's path that does not exist
// ("" when dir does).
func firstMissing(dir string) string {
	missing := ""
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || filepath.Dir(d) == d {
			return missing
		}
		missing = d
	}
}

// release lets go of the claim (nil: none): its file is removed while it
// is held, so whoever waits for it finds it gone and makes a new one, and
// so are the folders made for it, when nothing else is in them. Windows
// removes no open file: there it is removed once closed, unless a waiter
// opened it meanwhile (then the removal fails, and the waiter holds it).
func (c *sessionClaim) release() {
	if c == nil {
		return
	}
	removed := os.Remove(c.f.Name()) == nil
	c.f.Close()
	if !removed {
		os.Remove(c.f.Name())
	}
	if c.made == "" {
		return
	}
	for d := c.dir; ; d = filepath.Dir(d) {
		if os.Remove(d) != nil || d == c.made || filepath.Dir(d) == d {
			return
		}
	}
}
