package main

// Project trust, as pi 1.6 decides it where it cannot ask (its RPC
// mode): whether a session loads its working directory's own resources
// (./.pi/settings.json, mcp.json, prompts, skills, and the project's
// .agents/skills folders). --approve or --no-approve decides first; else
// the closest decision pi saved (its /trust) in trust.json in the agent
// directory, for the folder or one above it; else the user's
// settings.json defaultProjectTrust: "always" trusts, "ask" (the default)
// and "never" do not. rpi never writes trust.json: it has no terminal to
// ask in.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// trustDecision is a folder's: whether its project is trusted, and the
// warning a session opening there tells its client ("" for none).
type trustDecision struct {
	trusted bool
	notice  string
}

// trustDecisions are the host's, by working directory: a folder is
// decided once per process, as pi decides it once per cwd, so that the
// host's sessionDir and every session in that folder agree.
type trustDecisions struct {
	mu    mutex[trustMu] // guards byCwd; held while trust.json is read, so that a folder is decided once
	byCwd map[string]trustDecision
}

// projectTrust decides whether the project in cwd (absolute) is trusted
// (see the top of this file). With neither flag and no trust.json it
// costs one failed stat.
func (h *hostSettings) projectTrust(cwd string) trustDecision {
	switch {
	case h.cfg.approve:
		return trustDecision{trusted: true}
	case h.cfg.noApprove:
		return trustDecision{}
	}
	h.trust.mu.Lock()
	defer h.trust.mu.Unlock()
	if d, ok := h.trust.byCwd[cwd]; ok {
		return d
	}
	d := decideTrust(filepath.Join(h.agentDir, "trust.json"), cwd, h.defaultTrust)
	if h.trust.byCwd == nil {
		h.trust.byCwd = map[string]trustDecision{}
	}
	h.trust.byCwd[cwd] = d
	return d
}

// decideTrust is the decision for cwd of trust.json at path, else of
// defaultTrust (the user's defaultProjectTrust). A trust.json that
// cannot be used trusts nothing, whatever defaultTrust says, with a
// warning (pi fails to start on one).
func decideTrust(path, cwd, defaultTrust string) trustDecision {
	entries, found, err := readTrustFile(path)
	if err != nil {
		return trustDecision{notice: fmt.Sprintf("Ignored %s: %v; no project counts as trusted until it is fixed (--approve loads one's resources)", path, err)}
	}
	if found {
		if trusted, ok := savedTrust(entries, cwd); ok {
			return trustDecision{trusted: trusted}
		}
	}
	return trustDecision{trusted: defaultTrust == "always"}
}

// trustEntry is one of trust.json's folders, in the file's order, and
// its decision: true, false, or nil (none there: the folder above
// decides).
type trustEntry struct {
	path     string
	decision *bool
}

// readTrustFile reads trust.json as pi writes it: one object, each key a
// folder's path and its value true, false or null. found is false when
// there is none; err says why one that is there cannot be used (any
// other value makes the whole file unusable, as in pi).
func readTrustFile(path string) (entries []trustEntry, found bool, err error) {
	data, err := readRegularFile(path, maxResourceBytes)
	if err != nil {
		if pe, ok := err.(*fs.PathError); ok && pe.Err == syscall.ENOENT {
			return nil, false, nil
		}
		return nil, true, unwrapPathError(err)
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, true, fmt.Errorf("it must hold one JSON object of folders and true, false or null")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, true, trustJSONError(data, err)
		}
		key, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, true, trustJSONError(data, err)
		}
		var decision *bool
		switch string(raw) {
		case "true", "false":
			decision = new(bool)
			*decision = string(raw) == "true"
		case "null":
		default:
			return nil, true, fmt.Errorf("the value for %q must be true, false or null", key)
		}
		// A key given twice keeps its first place and its last value,
		// as JSON.parse has it.
		if i := indexOfTrustKey(entries, key); i >= 0 {
			entries[i].decision = decision
		} else {
			entries = append(entries, trustEntry{key, decision})
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, true, trustJSONError(data, err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, true, fmt.Errorf("it is not valid JSON (more after its object)")
	}
	return entries, true, nil
}

// trustJSONError says why trust.json's data is not valid JSON (err, a
// Decoder's), and where: Unmarshal's offsets, which a Decoder's only come
// near.
func trustJSONError(data []byte, err error) error {
	var v any
	if whole := json.Unmarshal(data, &v); whole != nil {
		err = whole
	}
	return fmt.Errorf("it is not valid JSON (%v)", jsonError(data, err))
}

func indexOfTrustKey(entries []trustEntry, key string) int {
	for i, e := range entries {
		if e.path == key {
			return i
		}
	}
	return -1
}

// savedTrust is the closest decision entries hold for cwd: for its
// canonical path (symlinks resolved, as pi's realpath; the path as it is
// when that fails), else for the folder above it, and so on up to the
// root. A key is compared cleaned, not resolved: a decision saved for a
// symlink's path is not one for the folder it points to, as in pi; on
// Windows without regard to case. A key that is not an absolute path
// (pi writes none) decides nothing. ok is false when no folder has one.
func savedTrust(entries []trustEntry, cwd string) (trusted, ok bool) {
	dir := cwd
	if real, err := filepath.EvalSymlinks(cwd); err == nil {
		dir = real
	}
	dir = trustKey(dir)
	for {
		for _, e := range entries {
			if e.decision != nil && filepath.IsAbs(e.path) && trustKey(e.path) == dir {
				return *e.decision, true
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false, false
		}
		dir = parent
	}
}

// trustKey is how trust.json's paths compare: cleaned, and case-folded
// on Windows, as pi's pathsEqual.
func trustKey(path string) string {
	path = filepath.Clean(path)
	if runtime.GOOS == "windows" {
		path = strings.ToLower(path)
	}
	return path
}

// defaultProjectTrust is the user's settings.json defaultProjectTrust
// (user, read at path), "ask" when unset; a value pi does not take is
// "ask" too, with a warning. A project's settings.json cannot set it, as
// in pi: a project could trust itself.
func defaultProjectTrust(user settingsFile, path string) (value, notice string) {
	switch v := user.DefaultProjectTrust; v {
	case "always", "never", "ask":
		return v, ""
	case "":
		return "ask", ""
	default:
		return "ask", fmt.Sprintf("Ignored defaultProjectTrust %q in %s: it is \"ask\", \"always\" or \"never\"", v, path)
	}
}
