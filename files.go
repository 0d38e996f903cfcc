package main

// Files as the tools and rpi use them: paths taken from the working
// directory, only regular files opened (never a FIFO, a device, /proc or
// rpi's own stdio, and never an open that blocks), errors that name the
// file, and lines read without holding a huge one.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// toolPath resolves a path argument: a leading @ is dropped, ~ is the home
// folder (when rpi knows one), relative paths are taken from the session
// cwd.
func (s *session) toolPath(p string) string {
	p = strings.TrimPrefix(p, "@")
	if s.set.home != "" && (p == "~" || strings.HasPrefix(p, "~/") || strings.HasPrefix(p, "~"+string(filepath.Separator))) {
		p = filepath.Join(s.set.home, p[1:])
	}
	return resolvePath(s.set.cwd, p)
}

// errNotRegular says a path is not a regular file.
type errNotRegular struct {
	path, kind string
}

func (e *errNotRegular) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.path, e.kind)
}

// fileKind names what a mode is, for errors.
func fileKind(mode os.FileMode) string {
	switch {
	case mode.IsDir():
		return "a directory"
	case mode&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case mode&os.ModeSocket != 0:
		return "a socket"
	case mode&os.ModeDevice != 0:
		return "a device"
	case mode&os.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// ownStdio is what rpi's own stdin, stdout and stderr are, so that no
// file tool reaches them even when they are regular files.
var ownStdio = lazy[[]os.FileInfo]{build: func() []os.FileInfo {
	var infos []os.FileInfo
	for _, f := range []*os.File{os.Stdin, os.Stdout, os.Stderr} {
		if info, err := f.Stat(); err == nil {
			infos = append(infos, info)
		}
	}
	return infos
}}

// openRegularSized opens path for reading (openRegular), and gives its
// size.
func openRegularSized(path string) (io.ReadCloser, int64, error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, info.Size(), nil
}

// openRegular opens path (following symlinks) only if it is a regular
// file, not one of rpi's own stdio and not on /proc or /sys: a FIFO,
// socket or device is refused before it is opened and checked again on
// the open file, and the open itself never blocks. Where nothing is
// there (and the open would create nothing), the open is not tried: it
// would fail the same way, and startup looks for many files it seldom
// finds (AGENTS.md in every folder up the tree, auth.json, …).
func openRegular(path string, flag int, perm os.FileMode) (*os.File, error) {
	info, err := os.Stat(path)
	if err == nil && !info.Mode().IsRegular() {
		return nil, &errNotRegular{path, fileKind(info.Mode())}
	}
	if pe, ok := err.(*fs.PathError); ok && pe.Err == syscall.ENOENT && flag&os.O_CREATE == 0 {
		return nil, &fs.PathError{Op: "open", Path: path, Err: pe.Err}
	}
	f, err := openNonBlocking(path, flag, perm)
	if err != nil {
		return nil, err
	}
	info, err = f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	kind := ""
	if !info.Mode().IsRegular() {
		kind = fileKind(info.Mode())
	}
	for _, own := range ownStdio.get() {
		if kind == "" && os.SameFile(info, own) {
			kind = "rpi's own stdin, stdout or stderr"
		}
	}
	if kind == "" {
		kind = specialFileSystem(f)
	}
	if kind != "" {
		f.Close()
		return nil, &errNotRegular{path, kind}
	}
	return f, nil
}

// checkRegular checks a path that another program will open by its name
// (the editor, in ACP mode) as openRegular would open it, reading
// nothing: a file that exists must be one openRegular opens, and what it
// is comes back, to make sure after that the path still leads there; a
// name that leads to no file (nil, nil) must not be in a folder of /proc
// or /sys, where the other program's /proc/self/fd/3 is its own. The
// error is openRegular's, as the file tools give it.
func checkRegular(path string) (os.FileInfo, error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err == nil {
		defer f.Close()
		return f.Stat()
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	_, _, _, dir, perr := openNewFilePlace(path)
	if perr != nil {
		return nil, err
	}
	dir.Close()
	return nil, nil
}

// readRegularFile reads a whole regular file (see openRegular) of at most
// limit bytes. A larger one is an *fs.PathError, which names the path
// once however the caller words it (unwrapPathError).
func readRegularFile(path string, limit int64) ([]byte, error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("it is larger than %s", formatSize(int(limit)))}
	}
	return data, nil
}

// fileError is the message for a file that cannot be used.
func fileError(verb, path string, err error) error {
	var nr *errNotRegular
	if errors.As(err, &nr) {
		return fmt.Errorf("Cannot %s %s: it is %s; the file tools only use regular files", verb, path, nr.kind)
	}
	return fmt.Errorf("Cannot %s %s: %v", verb, path, unwrapPathError(err))
}

// unwrapPathError drops the op and path an *fs.PathError repeats.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// formatSize is pi's size text: 512B, 50.0KB, 1.2MB.
func formatSize(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%dB", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1fKB", float64(n)/1024)
	default:
		return fmt.Sprintf("%.1fMB", float64(n)/(1<<20))
	}
}

// lineReader reads lines split on "\n" (a final line without one counts,
// even when empty, as strings.Split would), keeping at most keep bytes of
// each but counting its full length, so a huge line costs no memory. It
// stops with the context's error when ctx ends, even within one line.
type lineReader struct {
	ctx  context.Context
	br   *bufio.Reader
	keep int
	done bool
}

func (lr *lineReader) next() (line []byte, length int, ok bool, err error) {
	if lr.done {
		return nil, 0, false, nil
	}
	for {
		if lr.ctx.Err() != nil {
			return nil, 0, false, errors.New("Operation aborted")
		}
		chunk, rerr := lr.br.ReadSlice('\n')
		ended := rerr == nil
		if ended {
			chunk = chunk[:len(chunk)-1]
		}
		length += len(chunk)
		if room := lr.keep - len(line); room > 0 {
			line = append(line, chunk[:min(room, len(chunk))]...)
		}
		switch {
		case ended:
			return line, length, true, nil
		case rerr == bufio.ErrBufferFull:
			continue
		case rerr == io.EOF:
			lr.done = true
			return line, length, true, nil
		default:
			return nil, 0, false, rerr
		}
	}
}

// resolvePath makes path absolute against dir.
func resolvePath(dir, path string) string {
	if path == "" {
		return dir
	}
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(dir, path)
}

// sessionPathIn resolves a path naming a session file or folder
// (switch_session's sessionPath, --session, --fork, --session-dir, a
// hello's session) as pi 1.6's resolvePath does: a leading ~, alone or
// before a separator, is the home folder (when rpi knows one), and a
// relative path is taken from dir.
func sessionPathIn(dir, home, path string) string {
	expanded, _ := expandTilde(path, home) // no home: the ~ stays, as it does for a tool's path
	return resolvePath(dir, expanded)
}

// maxResourceBytes caps every file rpi reads at startup (settings,
// models.json, context files, templates, skills): a larger one is skipped
// with a warning.
const maxResourceBytes = 1 << 20

// writeFileWhole replaces path with data: written to a new file beside
// it (with mode), then renamed over it, so that a crash leaves the old
// file or the new, never a part.
func writeFileWhole(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
