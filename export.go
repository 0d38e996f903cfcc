package main

// Exporting the conversation as one self-contained HTML page, written as
// it is made (export_html).

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"
)

// replaceFileWith puts at path a regular file of what write writes,
// through a buffer, as it is made: into a new file beside path, under a
// fresh name (O_EXCL: nothing planted beside it is followed), renamed
// over path once whole. So a failed export leaves what was at path as it
// was and nothing beside it, two at once leave one of them whole, and
// the page never goes through a symlink at path: that is refused (a
// symlink planted beside a session file someone else wrote led the page
// into the file it names), as are a FIFO, a device, a folder, rpi's own
// stdio and a file no one may write (mode a-w: it stays as it is, as a
// write in place would have left it). A file of the user's replaced
// keeps its mode; a new one, or one replacing another user's, is 0666
// less the umask, as pi writes it (and os.Create makes a file).
func replaceFileWith(path string, write func(w *bufio.Writer) error) error {
	perm, keepMode := os.FileMode(0o666), false
	switch info, err := os.Lstat(path); {
	case err == nil:
		kind := ""
		if !info.Mode().IsRegular() {
			kind = fileKind(info.Mode()) // "a symbolic link" for one
		}
		for _, own := range ownStdio.get() {
			if kind == "" && os.SameFile(info, own) {
				kind = "rpi's own stdin, stdout or stderr"
			}
		}
		if kind != "" {
			return &errNotRegular{path, kind}
		}
		if info.Mode().Perm()&0o222 == 0 { // chmod a-w: kept as it is, as a write in place would have failed
			return &fs.PathError{Op: "write", Path: path, Err: errReadOnly}
		}
		if ownedByUs(info) { // another user's (planted there) gives its reader no way into the page
			perm, keepMode = info.Mode().Perm(), true
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	f, err := createBeside(path, perm)
	if err != nil {
		// No file is made on /proc or /sys: say so, rather than ENOENT.
		if dir, derr := openNonBlocking(filepath.Dir(path), os.O_RDONLY, 0); derr == nil {
			if kind := specialFileSystem(dir); kind != "" {
				err = &errNotRegular{path, kind}
			}
			dir.Close()
		}
		return err
	}
	err = write(bufio.NewWriterSize(f, 256<<10))
	if err == nil && keepMode {
		err = f.Chmod(perm) // as it was, whatever the umask
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

// errReadOnly refuses a file at an export's path that no one may write.
var errReadOnly = errors.New("it is read-only (no one may write it)")

// createBeside makes a new file in path's folder, named after it and
// nothing else there (.NAME.HEX.tmp, O_EXCL), with perm less the umask.
// When that name is too long for the folder (NAME itself may be as long
// as a name may be), it is .rpi.HEX.tmp.
func createBeside(path string, perm os.FileMode) (f *os.File, err error) {
	dir, prefix := filepath.Dir(path), "."+filepath.Base(path)
	for tries := 0; tries < 3; {
		var b [8]byte
		randomID(b[:])
		f, err = os.OpenFile(filepath.Join(dir, prefix+"."+hex.EncodeToString(b[:])+".tmp"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		switch {
		case errors.Is(err, syscall.ENAMETOOLONG) && prefix != ".rpi":
			prefix = ".rpi"
		case errors.Is(err, fs.ErrExist): // a name taken already (a random 64 bits) is tried again
			tries++
		default:
			return f, err
		}
	}
	return f, err
}

// writeHTML writes the export page to w as it goes, never held whole: a
// header, then one block per message.
func writeHTML(w *bufio.Writer, h sessionHeader, name string, messages []any) error {
	title := "rpi session " + h.ID
	if name != "" {
		title = name
	}
	text := func(parts ...string) {
		for _, part := range parts {
			writeHTMLEscaped(w, part)
		}
	}
	w.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>")
	text(title)
	w.WriteString("</title>\n<style>" +
		"body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#222}" +
		".m{border-left:4px solid #ccc;margin:1rem 0;padding:.5rem 1rem;background:#fafafa}" +
		".user{border-color:#36c}.system{border-color:#c90}.assistant{border-color:#393}.toolResult{border-color:#999}.error{border-color:#c33}" +
		".role{font-size:.8rem;color:#666;text-transform:uppercase}pre{white-space:pre-wrap;word-break:break-word;margin:.3rem 0}" +
		".thinking{color:#777;font-style:italic}</style></head><body>\n<h1>")
	text(title)
	w.WriteString("</h1>\n<p>Session ")
	text(h.ID)
	w.WriteString(", started ")
	text(h.Timestamp)
	w.WriteString(" in <code>")
	text(h.Cwd)
	w.WriteString("</code></p>\n")
	// A block is opened with its class and role, then its body is written.
	open := func(class string, role ...string) {
		w.WriteString(`<div class="m ` + class + `"><div class="role">`)
		text(role...)
		w.WriteString("</div>")
	}
	pre := func(parts ...string) {
		w.WriteString("<pre>")
		text(parts...)
		w.WriteString("</pre>")
	}
	content := func(blocks []contentBlock) {
		for _, c := range blocks {
			switch c.Type {
			case "text":
				pre(c.Text)
			case "thinking":
				w.WriteString(`<pre class="thinking">`)
				text(c.Thinking)
				w.WriteString("</pre>")
			case "toolCall":
				pre("→ ", c.Name, " ", string(c.Arguments))
			case "image":
				if strings.HasPrefix(c.MimeType, "image/") {
					w.WriteString(`<img alt="image" style="max-width:100%" src="data:`)
					text(c.MimeType)
					w.WriteString(";base64,")
					text(c.Data)
					w.WriteString(`">`)
				}
			}
		}
	}
	systemSeen := false
	for _, m := range messages {
		switch m := m.(type) {
		case *userMessage:
			open("user", "user")
			content(m.Content)
		case *assistantMessage:
			class := "assistant"
			if m.ErrorMessage != "" {
				class = "assistant error"
			}
			open(class, "assistant · ", m.Provider, "/", m.Model)
			content(m.Content)
			if m.ErrorMessage != "" {
				pre(m.StopReason, ": ", m.ErrorMessage)
			}
		case *toolResultMessage:
			class := "toolResult"
			if m.IsError {
				class += " error"
			}
			open(class, "result of ", m.ToolName)
			content(m.Content)
		case bashExecutionMessage:
			open("user", "bash")
			pre("$ ", m.Command, "\n", m.Output)
		case *summaryMessage:
			open("user", m.Role)
			pre(m.Summary)
		case rawMessage:
			role := messageRole(json.RawMessage(m))
			if role != "system" {
				open("user", role)
				pre(string(m))
				break
			}
			// The system prompt, then its updates, as pi 1.6's export
			// shows them: their text, not their JSON.
			label := "system prompt"
			if systemSeen {
				label = "system prompt update"
			}
			open("system", label)
			for _, part := range systemMessageParts(m, systemSeen) {
				pre(part)
			}
			systemSeen = true
		default:
			continue
		}
		w.WriteString("</div>\n")
	}
	w.WriteString("</body></html>\n")
	return w.Flush()
}

// systemMessageParts is what the export shows of a system message: its
// content, each section's text (or that it was removed), and the names
// of the tools it declares ("tools: …", or in an update "tools added:
// …") and of those it removes.
func systemMessageParts(m rawMessage, update bool) []string {
	f := systemMessageOf(m)
	var parts []string
	if text := systemContentText(f.Content); text != "" {
		parts = append(parts, text)
	}
	eachSection(f.Sections, func(name string, text *string) {
		switch {
		case text == nil:
			parts = append(parts, "section "+name+" removed")
		case *text != "":
			parts = append(parts, *text)
		}
	})
	var added, removed []string
	for _, t := range f.ToolsAdded {
		if name := declaredName(t); name != "" {
			added = append(added, name)
		}
	}
	for _, t := range f.ToolsRemoved {
		removed = append(removed, declaredName(t))
	}
	if len(added) > 0 {
		label := "tools: "
		if update {
			label = "tools added: "
		}
		parts = append(parts, label+strings.Join(added, ", "))
	}
	if len(removed) > 0 {
		parts = append(parts, "tools removed: "+strings.Join(removed, ", "))
	}
	return parts
}

// writeHTMLEscaped writes text escaped for HTML element content and
// attribute values, as UTF-8: each byte that is not part of a character
// is written as U+FFFD, as encoding/json writes it (the user's bash keeps
// its output's bytes as they came).
func writeHTMLEscaped(w *bufio.Writer, text string) {
	start := 0
	for i := 0; i < len(text); i++ {
		var escaped string
		switch c := text[i]; c {
		default:
			if c < utf8.RuneSelf {
				continue
			}
			if r, size := utf8.DecodeRuneInString(text[i:]); r != utf8.RuneError || size != 1 {
				i += size - 1
				continue
			}
			escaped = "\uFFFD"
		case '&':
			escaped = "&amp;"
		case '<':
			escaped = "&lt;"
		case '>':
			escaped = "&gt;"
		case '"':
			escaped = "&quot;"
		case '\'':
			escaped = "&#39;"
		}
		w.WriteString(text[start:i])
		w.WriteString(escaped)
		start = i + 1
	}
	w.WriteString(text[start:])
}
