package main

// The editor's files: a session's file tools read through the editor
// (fs/read_text_file: its buffers, unsaved changes included) and write
// through it (fs/write_text_file: it shows its review and saves) when the
// client offers that, after the path has been checked as the disk would
// check it (docs/acp.md, "The editor's files").

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// readLink reads a prompt's file:// link the way read does, until ctx
// ends.
func (as *acpSession) readLink(ctx context.Context, path string) (string, error) {
	f, err := acpFiles{as}.open(ctx, path)
	if err != nil {
		return "", errors.New(unwrapPathError(err).Error())
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, acpMaxLinkBytes+1))
	if err != nil {
		return "", err
	}
	return acpLinkText(string(data))
}

// acpFiles is a session's files as the editor has them: read through
// fs/read_text_file when the client offers it (unsaved buffers are what
// the model sees), written through fs/write_text_file when it offers
// that (the editor shows its review and saves); the disk otherwise.
type acpFiles struct{ as *acpSession }

func (f acpFiles) disk() diskFiles { return diskFiles{f.as.s.set.cwd, f.as.s.set.dirs} }

// read asks the editor for a file's text; ok is false when the client
// does not read files (or answered -32601): then the disk is read.
//
// The editor opens the path itself, as its own process: first the path
// is checked as the disk would open it (checkRegular, symlinks followed),
// and what the disk refuses — a FIFO (the editor would hang), a device,
// a file of /proc or /sys (the editor's own environment, with the user's
// keys), a symlink to one, a name under /proc/self/fd — is refused with
// the disk's error, the editor never asked. Once it answers, the path
// must still lead where it did (errEditorReadMoved).
func (f acpFiles) read(ctx context.Context, abs string) (text string, ok bool, err error) {
	text, _, ok, err = f.readText(ctx, abs)
	return text, ok, err
}

// readText is read, and whether the editor gave the text with bytes that
// are not UTF-8 (a file in another encoding), or with escapes of lone
// surrogates (as Python's surrogateescape gives such bytes), each taken
// as U+FFFD.
func (f acpFiles) readText(ctx context.Context, abs string) (text string, notUTF8, ok bool, err error) {
	if !f.as.agent.clientCaps().readTextFile || acpImagePath(abs) {
		return "", false, false, nil
	}
	before, err := checkRegular(abs)
	if err != nil {
		return "", false, true, err
	}
	text, notUTF8, err = f.as.agent.conn.readTextFile(ctx, f.as.id, editorPath(abs), 0, 0)
	var e *acpError
	switch {
	case acpMethodMissing(err):
		return "", false, false, nil
	case errors.As(err, &e) && e.Code == acpResourceNotFound:
		return "", false, true, &fs.PathError{Op: "open", Path: abs, Err: fs.ErrNotExist}
	case err != nil:
		return "", false, true, fmt.Errorf("the editor could not give it: %v", err)
	}
	if after, err := checkRegular(abs); err != nil || (before == nil) != (after == nil) || before != nil && !os.SameFile(before, after) {
		return "", false, true, errEditorReadMoved
	}
	return text, notUTF8, true, nil
}

// errEditorNotUTF8 is why the text the editor gave of a file in another
// encoding is not edited.
var errEditorNotUTF8 = errors.New("the editor gave its text with bytes that are not UTF-8 (a file in another encoding): an edit would replace each of them with U+FFFD; nothing was written")

// errDiskNotUTF8 is why a file on disk in another encoding is not edited
// when the editor writes it: fs/write_text_file takes text.
var errDiskNotUTF8 = errors.New("it has bytes that are not UTF-8 (a file in another encoding), and the editor writes text: an edit would replace each of them with U+FFFD; nothing was written")

// errEditorReadMoved fails a read through the editor when the path led
// elsewhere once the editor had answered (it was replaced meanwhile): what
// the editor read is not used.
var errEditorReadMoved = errors.New("the path changed while the editor read it; nothing was read")

// editorPath is the path the editor is given for abs, which rpi has
// checked: abs itself, but for a path through a directory whose links
// each process reads as its own (/proc/self/cwd, /proc/<pid>/root,
// /dev/fd/3, /dev/stdin…), which the editor would resolve in itself, to
// another file: then the file rpi found there.
func editorPath(abs string) string {
	if !strings.HasPrefix(abs, "/proc/") && !strings.HasPrefix(abs, "/dev/") {
		return abs
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		return resolved
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil { // a new file: its folder
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs // gone since it was checked: the editor finds nothing there either
}

// acpImagePath reports whether a path names an image, which read takes
// from the disk: an editor has no text for it.
func acpImagePath(abs string) bool {
	switch strings.ToLower(filepath.Ext(abs)) {
	case ".png", ".jpg", ".jpeg", ".gif", ".webp":
		return true
	}
	return false
}

func (f acpFiles) open(ctx context.Context, abs string) (io.ReadCloser, error) {
	text, ok, err := f.read(ctx, abs)
	switch {
	case !ok:
		return f.disk().open(ctx, abs)
	case err != nil:
		return nil, err
	}
	return io.NopCloser(strings.NewReader(text)), nil
}

// target opens the file a write or an edit changes: on disk, as the disk
// would (so that where it leads is checked before it is written), with
// what the editor holds as its text, and written through the editor when
// the client writes files. Text the editor gave with bytes that are not
// UTF-8 is not the file's (each such byte is a U+FFFD): it is not read
// (errEditorNotUTF8), so that an edit, which would write those U+FFFD
// back, is refused, and a write shows the file it replaces without its
// text; so is such a file read from the disk that the editor writes
// (errDiskNotUTF8).
func (f acpFiles) target(ctx context.Context, path, abs string, create bool) (changeTarget, error) {
	caps := f.as.agent.clientCaps()
	if !caps.readTextFile && !caps.writeTextFile {
		return f.disk().target(ctx, path, abs, create)
	}
	disk, err := openTarget(f.disk().roots(), path, abs, create || caps.writeTextFile)
	if err != nil {
		return nil, err
	}
	t := &acpTarget{files: f, disk: disk, path: path, abs: abs, viaEditor: caps.writeTextFile}
	text, notUTF8, ok, rerr := f.readText(ctx, abs)
	switch {
	case ok && rerr == nil && notUTF8:
		t.notUTF8, t.readErr = true, errEditorNotUTF8
	case !ok && disk.exists():
		data, derr := disk.read(ctx, maxEditBytes)
		t.text, t.has, t.readErr = string(data), derr == nil, derr
		if derr == nil && t.viaEditor && !utf8.Valid(data) { // the editor is sent text
			t.text, t.has, t.notUTF8, t.readErr = "", false, true, errDiskNotUTF8
		}
	case !ok:
		t.readErr = fs.ErrNotExist
	default:
		t.text, t.has, t.readErr = text, rerr == nil, rerr
	}
	if !create && !t.has {
		disk.close()
		if t.readErr == nil {
			t.readErr = fs.ErrNotExist
		}
		return nil, t.readErr
	}
	return t, nil
}

// acpTarget is a file a write or edit changes, as the editor has it.
type acpTarget struct {
	files     acpFiles
	disk      *fileTarget // the place on disk, checked before the write
	path, abs string
	viaEditor bool   // written through fs/write_text_file (else to the disk)
	text      string // what it holds, as the editor (or the disk) gave it
	has       bool   // it holds text: the file exists and could be read
	notUTF8   bool   // the editor has it, its text not UTF-8: not read (readErr)
	readErr   error  // why not
}

// exists reports whether there is a file to replace: one the editor (or
// the disk) gave the text of, one the editor gave in another encoding,
// or one on disk whose text the editor did not give (write shows it as a
// file it replaces without its text).
func (t *acpTarget) exists() bool  { return t.has || t.notUTF8 || t.disk.exists() }
func (t *acpTarget) size() int64   { return int64(len(t.text)) }
func (t *acpTarget) where() string { return t.disk.where() }
func (t *acpTarget) close()        { t.disk.close() }

func (t *acpTarget) read(ctx context.Context, limit int64) ([]byte, error) {
	switch {
	case !t.has:
		return nil, t.readErr
	case int64(len(t.text)) > limit:
		return nil, fmt.Errorf("%s is larger than %s", t.path, formatSize(int(limit)))
	}
	return []byte(t.text), nil
}

// write sets the file's content: through the editor, once the path still
// leads where it did when it was opened and, for an edit (before not
// nil), the editor (or the disk) still holds what the edit was made
// from; else on disk, where an edit's file must still hold what it read.
func (t *acpTarget) write(ctx context.Context, verb string, before, content []byte) error {
	if !t.viaEditor {
		return t.disk.write(ctx, verb, before, content)
	}
	if t.disk.check() != nil {
		return fmt.Errorf("Cannot %s %s: the path changed while this call was waiting; nothing was written", verb, t.path)
	}
	if before != nil && !t.holds(ctx, before) {
		return fmt.Errorf("Cannot %s %s: the file changed while this call was waiting; nothing was written (read it again and redo the %s)", verb, t.path, verb)
	}
	if err := t.files.as.agent.conn.writeTextFile(ctx, t.files.as.id, editorPath(t.abs), string(content)); err != nil {
		return fmt.Errorf("Cannot %s %s: the editor did not write it: %v", verb, t.path, err)
	}
	return nil
}

// holds reports whether the file, read again the way it was read, still
// holds text: text the editor now gives with bytes that are not UTF-8 is
// not the file's, though it reads the same (each such byte a U+FFFD).
func (t *acpTarget) holds(ctx context.Context, text []byte) bool {
	now, notUTF8, ok, err := t.files.readText(ctx, t.abs)
	if !ok {
		data, derr := t.disk.read(ctx, int64(len(text))+1)
		now, err = string(data), derr
	}
	return err == nil && !notUTF8 && now == string(text)
}
