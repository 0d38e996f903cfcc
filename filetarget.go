package main

// Where the file tools read and write (a session's fileEnv: the disk by
// default), and the file a write or edit call changes, resolved and opened
// once: the approval dialog is built from it, and the write goes through
// it. What the user approved is what is written, even when the path is
// replaced while the dialog is open (by a background process the model
// started, say): then nothing is written and the call says why.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// fileEnv is where a session's file tools read and write text files: the
// disk (diskFiles) unless its front end gives another (ACP: the editor's
// buffers through fs/read_text_file and fs/write_text_file, docs/acp.md).
// Paths are absolute. A file that does not exist is an error that
// errors.Is(err, fs.ErrNotExist) recognises.
type fileEnv interface {
	// open opens the file at abs for the read tool.
	open(ctx context.Context, abs string) (io.ReadCloser, error)
	// target opens the file a write (create: it may not exist yet) or an
	// edit (path as the model gave it) will change.
	target(ctx context.Context, path, abs string, create bool) (changeTarget, error)
}

// changeTarget is the file a write or an edit changes, opened once: the
// approval dialog is built from what it shows, and the write goes through
// it (on disk, a fileTarget).
type changeTarget interface {
	exists() bool  // a file that exists, not a new one
	size() int64   // its size when it was opened (0 for a new one)
	where() string // for the dialog: where a symlink leads, and when that is outside the working directory
	// read reads its whole text, at most limit bytes.
	read(ctx context.Context, limit int64) ([]byte, error)
	// write sets its content; verb names the tool in errors. With before
	// (edit), an existing file must still hold exactly that.
	write(ctx context.Context, verb string, before, content []byte) error
	close()
}

// A fileChange is what a write or an edit does to one file, as the call
// itself read it and writes it (docs/acp.md's diff): its absolute path, its
// text before (nil for a new file, or one that could not be read) and
// after, and where (the target's where(): where the path leads when a
// symlink takes it elsewhere, and whether that is outside the working
// directory; "" for a plain file inside it).
type fileChange struct {
	path    string
	existed bool
	before  []byte
	after   []byte
	where   string
}

// A changer is a tool call that changes one file (write, edit): change
// says how once prepare has opened it, before the approval and the run.
type changer interface {
	change() fileChange
}

// diskFiles is the disk, in the session's working directory (and its
// other directories, dirs: a file in one is not outside).
type diskFiles struct {
	cwd  string
	dirs []string
}

func (d diskFiles) open(ctx context.Context, abs string) (io.ReadCloser, error) {
	return openRegular(abs, os.O_RDONLY, 0)
}

func (d diskFiles) target(ctx context.Context, path, abs string, create bool) (changeTarget, error) {
	return openTarget(d.roots(), path, abs, create)
}

// roots are the directories the session works in: the cwd first.
func (d diskFiles) roots() []string {
	return append([]string{d.cwd}, d.dirs...)
}

// fileTarget is the file a call will change on disk. An existing file is held
// open for reading and writing, and written through that descriptor; a new
// one is created through the open folder it will be in, with O_EXCL. Before
// writing, check makes sure the path still leads there.
//
// ACP mode writes through the editor, by path (docs/acp.md): it opens the
// target the same way to build its permission request, and calls check
// right before it sends fs/write_text_file, which it sends only when the
// path still leads where the request said.
type fileTarget struct {
	path  string // as the model gave it, for messages
	abs   string // joined to the working directory, symlinks not resolved
	real  string // where abs leads, symlinks resolved: what the dialog names
	file  *os.File
	id    os.FileInfo // the open file, or for a new file the open folder
	roots []string    // the session's cwd and other directories, for where
	// For a new file: the deepest folder of abs that exists (as reached
	// from abs, and open), and the names to create below it: folders, then
	// the file.
	dirPath string
	dir     *os.Root
	names   []string
}

// errPathChanged says the path no longer leads where it did when it was opened.
var errPathChanged = errors.New("the path changed")

// openTarget opens the file at path (abs) for a call that will change it:
// an existing regular file (following symlinks; for reading and writing,
// or with create only for writing when it cannot be read), or with create
// the place where a new one will be.
func openTarget(roots []string, path, abs string, create bool) (*fileTarget, error) {
	f, err := openRegular(abs, os.O_RDWR, 0)
	if create && errors.Is(err, fs.ErrPermission) {
		f, err = openRegular(abs, os.O_WRONLY, 0) // a file write may change but not read is still written
	}
	if err == nil {
		t := &fileTarget{path: path, abs: abs, file: f, roots: roots}
		t.id, err = f.Stat()
		if err == nil {
			t.real, err = filepath.EvalSymlinks(abs)
		}
		if err == nil {
			if info, serr := os.Stat(t.real); serr != nil || !os.SameFile(info, t.id) {
				err = errPathChanged // replaced between the open and the look
			}
		}
		if err != nil {
			f.Close()
			return nil, err
		}
		return t, nil
	}
	if !create || !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	dirPath, realDir, names, dir, err := openNewFilePlace(abs)
	if err != nil {
		return nil, err
	}
	t := &fileTarget{path: path, abs: abs, real: filepath.Join(append([]string{realDir}, names...)...), dirPath: dirPath, dir: dir, names: names, roots: roots}
	t.id, err = dir.Stat(".")
	if err == nil && t.check() != nil {
		err = errPathChanged
	}
	if err != nil {
		dir.Close()
		return nil, err
	}
	return t, nil
}

// openNewFilePlace opens the folder a file that does not exist at abs
// would be created in (newFilePlace), as it is reached from abs (dirPath)
// and where that really is (realDir), with the names to create below it.
// A folder of /proc or /sys is refused (/proc/self/fd/N, say): no file
// of the tools' is made or read there.
func openNewFilePlace(abs string) (dirPath, realDir string, names []string, dir *os.Root, err error) {
	if dirPath, names, err = newFilePlace(abs); err == nil {
		realDir, err = filepath.EvalSymlinks(dirPath)
	}
	if err == nil {
		dir, err = os.OpenRoot(realDir)
	}
	if err != nil {
		return "", "", nil, nil, err
	}
	f, err := dir.Open(".")
	kind := ""
	if err == nil {
		kind = specialFileSystem(f)
		f.Close()
	}
	if err == nil && kind != "" {
		err = &errNotRegular{abs, kind}
	}
	if err != nil {
		dir.Close()
		return "", "", nil, nil, err
	}
	return dirPath, realDir, names, dir, nil
}

// newFilePlace finds where a file that does not exist would be created: a
// dangling symlink at abs is followed to where it points, and the deepest
// folder on the way that exists is returned with the names to create below
// it (folders, then the file).
func newFilePlace(abs string) (dirPath string, names []string, err error) {
	p := abs
	for hops := 0; ; hops++ {
		info, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return "", nil, err
		}
		if info.Mode()&os.ModeSymlink == 0 {
			return "", nil, errPathChanged // it exists after all
		}
		if hops == 40 {
			return "", nil, fmt.Errorf("too many levels of symbolic links")
		}
		target, err := os.Readlink(p)
		if err != nil {
			return "", nil, err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Dir(p) + string(filepath.Separator) + target
		}
		if p, err = followDots(target); err != nil {
			return "", nil, err
		}
	}
	for dirPath = p; ; {
		parent := filepath.Dir(dirPath)
		if parent == dirPath {
			return "", nil, fs.ErrNotExist
		}
		names = append([]string{filepath.Base(dirPath)}, names...)
		dirPath = parent
		info, err := os.Stat(dirPath)
		if err == nil && !info.IsDir() {
			return "", nil, fmt.Errorf("%s is not a directory", dirPath)
		}
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return dirPath, names, err
		}
	}
}

// followDots cleans a symlink's target as the system follows it: a ..
// after a symlinked folder is the parent of where that folder leads, not
// the folder the link is in, so the target up to its last .. is
// resolved (it must exist, as it must for the system), and only the rest
// is cleaned word by word.
func followDots(target string) (string, error) {
	last := -1 // where the last .. element ends
	for i := 0; i+2 <= len(target); i++ {
		if target[i:i+2] == ".." && (i == 0 || os.IsPathSeparator(target[i-1])) &&
			(i+2 == len(target) || os.IsPathSeparator(target[i+2])) {
			last = i + 2
		}
	}
	if last < 0 {
		return filepath.Clean(target), nil
	}
	real, err := filepath.EvalSymlinks(target[:last])
	if err != nil {
		return "", err
	}
	return filepath.Join(real, target[last:]), nil
}

// exists reports whether the target is a file that exists (not a new one).
func (t *fileTarget) exists() bool { return t.file != nil }

// size is the size of the file when it was opened (0 for a new one).
func (t *fileTarget) size() int64 {
	if t.file == nil {
		return 0
	}
	return t.id.Size()
}

// check reports errPathChanged unless the path still leads to the file
// that was opened, or (for a new file) still to the same place in the
// same open folder.
func (t *fileTarget) check() error {
	if t.file != nil {
		if info, err := os.Stat(t.abs); err != nil || !os.SameFile(info, t.id) {
			return errPathChanged
		}
		return nil
	}
	dirPath, names, err := newFilePlace(t.abs)
	if err != nil {
		return errPathChanged
	}
	realDir, err := filepath.EvalSymlinks(dirPath)
	if err != nil || filepath.Join(append([]string{realDir}, names...)...) != t.real {
		return errPathChanged
	}
	if info, err := os.Stat(t.dirPath); err != nil || !os.SameFile(info, t.id) {
		return errPathChanged
	}
	return nil
}

// read reads the whole file, at most limit bytes.
func (t *fileTarget) read(ctx context.Context, limit int64) ([]byte, error) {
	if t.file == nil {
		return nil, fs.ErrNotExist
	}
	data, err := io.ReadAll(io.NewSectionReader(t.file, 0, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %s", t.path, formatSize(int(limit)))
	}
	return data, nil
}

// write sets the file's content after check, through the open file (or,
// for a new file, the open folder); verb names the tool in errors. With
// before (edit, which opened it for reading too), an existing file must
// still hold exactly that.
func (t *fileTarget) write(ctx context.Context, verb string, before, content []byte) error {
	pathChanged := fmt.Errorf("Cannot %s %s: the path changed while this call was waiting; nothing was written", verb, t.path)
	if t.check() != nil {
		return pathChanged
	}
	if t.file == nil {
		err := t.create(content)
		if errors.Is(err, errPathChanged) {
			return pathChanged
		}
		return err
	}
	if before != nil {
		now, err := t.read(ctx, int64(len(before))+1)
		if err != nil || !bytes.Equal(now, before) {
			return fmt.Errorf("Cannot %s %s: the file changed while this call was waiting; nothing was written (read it again and redo the %s)", verb, t.path, verb)
		}
	}
	err := t.file.Truncate(0)
	if err == nil {
		_, err = t.file.WriteAt(content, 0)
	}
	if err != nil {
		return fileError(verb, t.path, err)
	}
	return nil
}

// create makes the missing folders one by one below the open folder, each
// checked to be the plain folder just made (or found), then the file with
// O_EXCL: nothing that appeared at one of those names meanwhile is
// followed.
func (t *fileTarget) create(content []byte) error {
	dir := t.dir
	defer func() {
		if dir != t.dir {
			dir.Close()
		}
	}()
	last := len(t.names) - 1
	for _, name := range t.names[:last] {
		if err := dir.Mkdir(name, 0o777); err != nil && !errors.Is(err, fs.ErrExist) { // less the umask, as pi's mkdir
			return fmt.Errorf("Cannot create the directory of %s: %v", t.path, unwrapPathError(err))
		}
		made, err := dir.Lstat(name)
		if err != nil || !made.IsDir() {
			return errPathChanged
		}
		sub, err := dir.OpenRoot(name)
		if err != nil {
			return errPathChanged
		}
		if opened, err := sub.Stat("."); err != nil || !os.SameFile(opened, made) {
			sub.Close()
			return errPathChanged
		}
		if dir != t.dir {
			dir.Close()
		}
		dir = sub
	}
	f, err := dir.OpenFile(t.names[last], os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666) // less the umask, as pi's writeFile
	if errors.Is(err, fs.ErrExist) {
		return errPathChanged
	}
	if err != nil {
		return fileError("write", t.path, err)
	}
	_, err = f.Write(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fileError("write", t.path, err)
	}
	return nil
}

// close lets go of the open file or folder.
func (t *fileTarget) close() {
	if t.file != nil {
		t.file.Close()
	}
	if t.dir != nil {
		t.dir.Close()
	}
}

// inside reports whether the file, symlinks resolved, is in root (itself
// resolved).
func (t *fileTarget) inside(root string) bool {
	real, _ := filepath.EvalSymlinks(root)
	rel, err := filepath.Rel(real, t.real)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// where says, for the dialog, where the path leads when a symlink takes it
// elsewhere, when that is outside the working directory (and the session's
// other directories), and when the file
// has other names (hard links: wherever they are, the change is theirs
// too).
func (t *fileTarget) where() string {
	where := ""
	if t.real != t.abs {
		where = " → " + escapeControl(t.real)
	}
	switch {
	case slices.ContainsFunc(t.roots, t.inside):
	case len(t.roots) == 1:
		where += " (outside the working directory)"
	default:
		where += " (outside the working directory and the additional directories)"
	}
	if t.file != nil {
		if n := hardLinks(t.id); n > 1 {
			where += fmt.Sprintf(" (a hard link: the file has %d names, perhaps outside the working directory, and the change is theirs too)", n)
		}
	}
	return where
}
