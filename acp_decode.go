package main

// The ACP wire's input (docs/acp.md): a line decoded once, strictly, in
// JSON-RPC's order (JSON, an object, jsonrpc "2.0", what the message is),
// with the id its error goes back under wherever it can be read (a line
// nested too deeply, the head of an answer too long), and a request's
// params read by exact key, each accessor's error a -32602 naming the
// field.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ---- Decoding a line ----

// acpMessage is one decoded input line: a request (method and id), a
// notification (method, no id) or a response (id, and result or error).
type acpMessage struct {
	id       json.RawMessage // as sent: a number, a string or null; nil when absent
	method   string
	params   json.RawMessage // nil when absent or null
	response bool
	result   json.RawMessage // a response's result
	failure  *acpError       // a response's error
	notUTF8  bool            // a response whose line had bytes that are not UTF-8, or lone surrogates' escapes (each taken as U+FFFD)
}

// decodeACP checks a line in JSON-RPC's order: JSON, an object, jsonrpc
// "2.0", then what the message is. On failure it returns the error to
// answer and the id to answer it with (nil: null), and, for a message
// with an id and no method, that message as a failed response.
//
// A line that is not valid UTF-8 is a parse error, unless it is an
// answer to one of rpi's requests: an editor gives the text of a file
// that is not UTF-8 (a Latin-1 one) as it is, and that text is taken with
// each byte that is not UTF-8 as U+FFFD, as read gives such a file from
// the disk (the request would otherwise wait for an answer that came).
// An answer that escapes a lone surrogate ("\udce9": half of a pair
// without the other, which is how Python's surrogateescape carries such
// a byte) is taken the same: JSON decodes it to U+FFFD too.
func decodeACP(line []byte) (*acpMessage, *acpError, json.RawMessage) {
	if !utf8.Valid(line) {
		msg, bad, id := decodeACPLine(replaceInvalidUTF8(line))
		if msg == nil || !msg.response {
			return nil, &acpError{Code: acpParseError, Message: "Parse error: invalid UTF-8"}, nil
		}
		msg.notUTF8 = true
		return msg, bad, id
	}
	msg, bad, id := decodeACPLine(line)
	// wellFormedJSON changes a valid UTF-8 text only where it escapes a lone surrogate.
	if msg != nil && msg.response && !bytes.Equal(wellFormedJSON(line), line) {
		msg.notUTF8 = true
	}
	return msg, bad, id
}

// replaceInvalidUTF8 is b with each byte that is not part of a UTF-8
// character replaced by U+FFFD (as encoding/json decodes a string).
func replaceInvalidUTF8(b []byte) []byte {
	out := make([]byte, 0, len(b)+len(b)/4)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			out = append(out, "\uFFFD"...)
		} else {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}

// decodeACPLine is decodeACP of a line that is valid UTF-8.
func decodeACPLine(line []byte) (*acpMessage, *acpError, json.RawMessage) {
	members, ok := scanObject(line, nil)
	if !ok {
		fields, err := rawObject(line)
		if err != nil && strings.HasSuffix(err.Message, "exceeded max depth") {
			return acpTooDeep(line)
		}
		if err != nil {
			return nil, err, nil
		}
		members = fields // valid, but nested deeper than scanObject follows
	}
	r := &fields{members: members}
	msg := &acpMessage{}
	rawID, hasID := r.field("id")
	usableID := hasID && len(rawID) > 0 && (rawID[0] == '"' || rawID[0] == '-' || rawID[0] >= '0' && rawID[0] <= '9')
	var answerID json.RawMessage // the id an error goes back with
	if usableID {
		answerID = rawID
	}
	rawMethod, hasMethod := r.field("method")
	result, hasResult := r.field("result")
	rawError, hasError := r.field("error")
	hasError = hasError && string(rawError) != "null" // an error that is null is none: some clients write both members
	// A message with an id and no method is an answer, or meant as one:
	// when it is not a valid one, it still comes back (as a response
	// that failed) beside its error, so that a request of rpi's waiting
	// for that id ends instead of getting an error back under its id.
	var answer *acpMessage
	if usableID && !hasMethod {
		answer = &acpMessage{id: rawID, response: true}
	}
	invalidRequest := func(why string) (*acpMessage, *acpError, json.RawMessage) {
		if answer != nil {
			answer.failure = &acpError{Code: acpInvalidRequest, Message: "the client's answer is not a JSON-RPC response: " + why}
		}
		return answer, &acpError{Code: acpInvalidRequest, Message: "Invalid request: " + why}, answerID
	}
	if v, ok := r.field("jsonrpc"); !ok || string(v) != `"2.0"` {
		return invalidRequest(`jsonrpc must be "2.0"`)
	}
	if hasID && !usableID && string(rawID) != "null" {
		return invalidRequest("id must be a number or a string")
	}
	if hasID {
		msg.id = rawID
	}
	if params, ok := r.field("params"); ok && string(params) != "null" {
		msg.params = params
	}
	switch {
	case hasMethod:
		if len(rawMethod) == 0 || rawMethod[0] != '"' || !unquote(rawMethod, &msg.method) {
			return invalidRequest("method must be a string")
		}
		return msg, nil, nil
	case hasID && (hasResult || hasError):
		msg.response = true
		if hasError {
			msg.failure = decodeACPError(rawError)
		} else {
			msg.result = result
		}
		return msg, nil, nil
	}
	return invalidRequest("no method")
}

// acpTooDeep answers a message nested deeper than encoding/json decodes
// (10000 levels): -32600, under the message's id when its top level holds
// one that is a number or a string, so that the request it was meant as
// is answered; a message with that id and no method is taken as a failed
// answer (as decodeACP's malformed answers are).
func acpTooDeep(line []byte) (*acpMessage, *acpError, json.RawMessage) {
	e := &acpError{Code: acpInvalidRequest, Message: "Invalid request: nested too deeply (more than 10000 levels)"}
	id, hasMethod := acpTopLevel(line)
	if id == nil {
		return nil, e, nil
	}
	var answer *acpMessage
	if !hasMethod {
		answer = &acpMessage{id: id, response: true, failure: &acpError{Code: acpInvalidRequest,
			Message: "the client's answer is not a JSON-RPC response: nested too deeply"}}
	}
	return answer, e, id
}

// acpTopLevel reads a JSON object's top level without following what is
// nested in its values: its "id" when that is a number or a string (nil
// otherwise, or when the top level is not a well-formed object), and
// whether it has a "method".
func acpTopLevel(line []byte) (id json.RawMessage, hasMethod bool) {
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return nil, false
	}
	for i = skipSpace(line, i+1); i < len(line) && line[i] != '}'; {
		keyStart := i
		if i = skipString(line, i); i < 0 {
			return nil, false
		}
		var key string
		if !unquote(line[keyStart:i], &key) {
			return nil, false
		}
		if i = skipSpace(line, i); i >= len(line) || line[i] != ':' {
			return nil, false
		}
		i = skipSpace(line, i+1)
		valueStart := i
		if i = skipNested(line, i); i < 0 {
			return nil, false
		}
		value := line[valueStart:i]
		switch {
		case key == "method":
			hasMethod = true
		case key == "id" && len(value) > 0 && (value[0] == '"' || value[0] == '-' || value[0] >= '0' && value[0] <= '9'):
			id = value
		case key == "id":
			id = nil // the last id is the one (as encoding/json reads a key given twice)
		}
		if i = skipSpace(line, i); i < len(line) && line[i] == ',' {
			i = skipSpace(line, i+1)
		} else if i >= len(line) || line[i] != '}' {
			return nil, false
		}
	}
	if i >= len(line) {
		return nil, false
	}
	return id, hasMethod
}

// skipNested returns the index just past the value at b[i]: a string or
// scalar as skipValue reads it; an object or array by its brackets, at any
// depth, its strings skipped whole (what is inside is not checked).
func skipNested(b []byte, i int) int {
	if i >= len(b) || b[i] != '{' && b[i] != '[' {
		return skipValue(b, i, 0)
	}
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			if i = skipString(b, i); i < 0 {
				return -1
			}
			i--
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// rawObject decodes a line scanObject did not take with encoding/json:
// not JSON is a parse error, JSON that is not an object (a batch array)
// an invalid request; an object nested deeper than scanObject follows
// comes back as its members.
func rawObject(line []byte) ([]member, *acpError) {
	var fields map[string]json.RawMessage
	err := json.Unmarshal(line, &fields)
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr) || err == nil && fields == nil:
		return nil, &acpError{Code: acpInvalidRequest, Message: "Invalid request: a message must be one JSON object (batches are not supported)"}
	case err != nil:
		return nil, &acpError{Code: acpParseError, Message: "Parse error: " + err.Error()}
	}
	members := []member{}
	for k, v := range fields {
		members = append(members, member{[]byte(k), v})
	}
	return members, nil
}

// acpHeadID is the id of the answer whose first bytes head holds (what
// is kept of a line too long): a top-level "id" that is a number,
// followed by "result" or "error" and no "method" before them; nil when
// head shows no such thing.
func acpHeadID(head []byte) json.RawMessage {
	d := json.NewDecoder(bytes.NewReader(head))
	d.UseNumber()
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var id json.RawMessage
	for d.More() {
		key, err := d.Token()
		switch {
		case err != nil || key == "method":
			return nil
		case (key == "result" || key == "error") && id != nil:
			return id
		}
		var value json.RawMessage
		if d.Decode(&value) != nil {
			return nil
		}
		if key == "id" && len(value) > 0 && (value[0] == '-' || value[0] >= '0' && value[0] <= '9') {
			id = value
		}
	}
	return nil
}

// acpHeadRequestID is the id of the request whose first bytes head
// holds (what is kept of a line too long): a top-level "method" and an
// "id" that is a number or a string, both before the line was cut; nil
// when head shows no such thing (its answer then goes under id null).
func acpHeadRequestID(head []byte) json.RawMessage {
	d := json.NewDecoder(bytes.NewReader(head))
	d.UseNumber()
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var id json.RawMessage
	method := false
	for d.More() && (id == nil || !method) {
		key, err := d.Token()
		if err != nil {
			return nil
		}
		var value json.RawMessage
		if d.Decode(&value) != nil {
			return nil // cut in this value
		}
		switch {
		case key == "method":
			method = true
		case key == "id" && len(value) > 0 && (value[0] == '"' || value[0] == '-' || value[0] >= '0' && value[0] <= '9'):
			id = value
		}
	}
	if !method {
		return nil
	}
	return id
}

// decodeACPError reads a response's error object; one that is not
// {code: integer, message: string} counts as an internal error.
func decodeACPError(raw json.RawMessage) *acpError {
	if code, message, ok := decodeRPCError(raw); ok && code == int64(int32(code)) {
		return &acpError{Code: int(code), Message: clientErrorMessage(message)}
	}
	return &acpError{Code: acpInternalError, Message: "the client's error is not a JSON-RPC error object"}
}

// acpMaxClientMessage bounds the message of a client's error answer that
// rpi keeps: it becomes a tool call's error (a file the editor could not
// give, a terminal it could not make), which the model is sent with
// every later request.
const acpMaxClientMessage = 4 << 10

// clientErrorMessage is a client's error message, its first
// acpMaxClientMessage bytes at most (ending at a character's start), with
// how much more there was.
func clientErrorMessage(message string) string {
	if len(message) <= acpMaxClientMessage {
		return message
	}
	cut := acpMaxClientMessage
	for cut > 0 && !utf8.RuneStart(message[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes)", message[:cut], len(message)-cut)
}

// ---- Params ----

// acpParams are a request's params (or an object inside them), read by
// exact key; path is what names a field inside ("prompt[0]."). Unknown
// fields and _meta are ignored. Every accessor's error is a -32602 that
// names the field and what it must be.
type acpParams struct {
	r    *fields
	path string
}

// paramsOf decodes raw (nil: none) as an object; path names it in errors.
func paramsOf(raw json.RawMessage, path string) (acpParams, error) {
	p := acpParams{r: &fields{}, path: path}
	if raw == nil || string(raw) == "null" {
		return p, nil
	}
	members, ok := scanObject(raw, p.r.room[:0])
	if !ok {
		if raw[0] == '{' { // nested deeper than scanObject follows
			p.r.members, _ = rawObject(raw)
			return p, nil
		}
		what := "params"
		if path != "" {
			what = strings.TrimSuffix(path, ".")
		}
		return p, invalidParams("Invalid %s: must be an object", what)
	}
	p.r.members = members
	return p, nil
}

func (p acpParams) name(field string) string { return p.path + field }

// has reports whether field is present and not null.
func (p acpParams) has(field string) bool { return p.r.has(field) }

func (p acpParams) raw(field string) json.RawMessage {
	raw, _ := p.r.field(field)
	return raw
}

// str reads a required string.
func (p acpParams) str(field string) (string, error) {
	if !p.has(field) {
		return "", paramError(missing(p.name(field), "a string"))
	}
	return p.optStr(field)
}

// optStr reads an optional string ("" when absent).
func (p acpParams) optStr(field string) (string, error) {
	var s string
	if raw := p.raw(field); p.has(field) && (raw[0] != '"' || !unquote(raw, &s)) {
		return "", paramError(invalid(p.name(field), "a string"))
	}
	return s, nil
}

// boolean reads an optional boolean.
func (p acpParams) boolean(field string, otherwise bool) (bool, error) {
	switch raw := string(p.raw(field)); {
	case !p.has(field):
		return otherwise, nil
	case raw == "true" || raw == "false":
		return raw == "true", nil
	}
	return false, paramError(invalid(p.name(field), "true or false"))
}

// integer reads a required whole number from lo to hi.
func (p acpParams) integer(field string, lo, hi int64) (int64, error) {
	want := fmt.Sprintf("a whole number from %d to %d", lo, hi)
	if !p.has(field) {
		return 0, paramError(missing(p.name(field), want))
	}
	n, err := strconv.ParseInt(string(p.raw(field)), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, paramError(invalid(p.name(field), want))
	}
	return n, nil
}

// object reads an optional object (ok false when absent).
func (p acpParams) object(field string) (obj acpParams, ok bool, err error) {
	if !p.has(field) {
		return acpParams{r: &fields{}, path: p.name(field) + "."}, false, nil
	}
	if raw := p.raw(field); raw[0] != '{' {
		return obj, false, paramError(invalid(p.name(field), "an object"))
	}
	obj, err = paramsOf(p.raw(field), p.name(field)+".")
	return obj, err == nil, err
}

// array reads a required array's items, raw.
func (p acpParams) array(field, want string) ([]json.RawMessage, error) {
	if !p.has(field) {
		return nil, paramError(missing(p.name(field), want))
	}
	var items []json.RawMessage
	if raw := p.raw(field); raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, paramError(invalid(p.name(field), want))
	}
	return items, nil
}

// ---- The params of the session methods ----

// acpSessionID reads a request's sessionId: a string that can be a
// session's id (no path in it).
func acpSessionID(p acpParams) (string, error) {
	id, err := p.str("sessionId")
	if err == nil && !acpIsSessionID(id) {
		err = invalidParams("Invalid field sessionId: must be a session's id")
	}
	return id, err
}

// acpIsSessionID reports whether id can be a session's id: not empty,
// and no path.
func acpIsSessionID(id string) bool {
	return id != "" && !strings.ContainsAny(id, `/\`) && id != "." && id != ".."
}

// acpAbsDir reads an absolute directory path (cwd): required, or
// optional ("" when absent).
func acpAbsDir(p acpParams, field string, required bool) (string, error) {
	if !required && !p.has(field) {
		return "", nil
	}
	dir, err := p.str(field)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(dir) {
		return "", invalidParams("Invalid field %s: must be an absolute path, got %q", p.name(field), dir)
	}
	return filepath.Clean(dir), nil
}

// acpIsDir refuses a cwd that is not a directory (one that does not
// exist, or a file): a session's tools and commands run there.
func acpIsDir(cwd string) error {
	if info, err := os.Stat(cwd); err != nil || !info.IsDir() {
		return invalidParams("Invalid field cwd: %s is not a directory", cwd)
	}
	return nil
}

// acpMaxDirectories bounds a session's additionalDirectories.
const acpMaxDirectories = 32

// acpWhere reads where a session opens, for new, load, resume and fork:
// cwd (absolute), the editor's mcpServers (required: an array must be
// there) and the additionalDirectories.
func acpWhere(p acpParams, serversRequired bool) (cwd string, servers []mcpServerConfig, dirs []string, err error) {
	if cwd, err = acpAbsDir(p, "cwd", true); err != nil {
		return "", nil, nil, err
	}
	if servers, err = acpMCPServers(p, serversRequired, cwd); err != nil {
		return "", nil, nil, err
	}
	dirs, err = acpDirectories(p)
	return cwd, servers, dirs, err
}

// acpDirectories reads additionalDirectories (optional; null or absent
// is none): an array of at most acpMaxDirectories strings, each an
// absolute path without a .. element (the disk would take it after a
// symlink, a clean path before it: they may not be one directory) nor a
// control or format character (the system prompt names it), cleaned (//,
// /./, a trailing /). What the paths name is checked off the loop, by
// acpCheckDirectories.
func acpDirectories(p acpParams) ([]string, error) {
	const field = "additionalDirectories"
	if !p.has(field) {
		return nil, nil
	}
	items, err := p.array(field, "an array of absolute paths")
	if err != nil {
		return nil, err
	}
	if len(items) > acpMaxDirectories {
		return nil, invalidParams("Invalid field %s: at most %d directories, got %d", p.name(field), acpMaxDirectories, len(items))
	}
	dirs := make([]string, 0, len(items))
	for i, raw := range items {
		name := fmt.Sprintf("%s[%d]", p.name(field), i)
		var dir string
		switch {
		case raw[0] != '"' || !unquote(raw, &dir):
			return nil, paramError(invalid(name, "an absolute path"))
		case !filepath.IsAbs(dir):
			return nil, invalidParams("Invalid field %s: must be an absolute path, got %q", name, dir)
		case slices.Contains(strings.Split(filepath.ToSlash(dir), "/"), ".."):
			return nil, invalidParams("Invalid field %s: %q has a .. in it: give the directory's own path", name, dir)
		case strings.IndexFunc(dir, isControlOrFormat) >= 0:
			return nil, invalidParams("Invalid field %s: %q has a control or format character in it", name, dir)
		}
		dirs = append(dirs, filepath.Clean(dir))
	}
	return dirs, nil
}

// isControlOrFormat reports whether r is a control character (a newline
// included) or a format one (a bidi override).
func isControlOrFormat(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

// acpCheckDirectories checks what acpDirectories read, on disk, symlinks
// followed: each must be a directory rpi can read, not one of /proc or
// /sys; one that is the cwd, or a directory named before it (two names of
// one directory, a symlink to it), is dropped. The rest keep their order
// and the names given.
func acpCheckDirectories(cwd string, dirs []string) ([]string, error) {
	var kept []string
	var seen []os.FileInfo
	if info, err := os.Stat(cwd); err == nil {
		seen = append(seen, info)
	}
	for i, dir := range dirs {
		name := fmt.Sprintf("additionalDirectories[%d]", i)
		info, err := acpReadableDir(dir)
		if err != nil {
			return nil, invalidParams("Invalid field %s: %s %v", name, dir, err)
		}
		if !slices.ContainsFunc(seen, func(o os.FileInfo) bool { return os.SameFile(o, info) }) {
			seen = append(seen, info)
			kept = append(kept, dir)
		}
	}
	return kept, nil
}

// acpReadableDir is dir's own information when it is a directory rpi can
// list, not of /proc or /sys; else why not, as words after its path.
func acpReadableDir(dir string) (os.FileInfo, error) {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, errors.New("does not exist")
	case err != nil:
		return nil, fmt.Errorf("cannot be reached: %v", unwrapPathError(err))
	case !info.IsDir():
		return nil, errors.New("is not a directory")
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %v", unwrapPathError(err))
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("cannot be read: %v", unwrapPathError(err))
	}
	if kind := specialFileSystem(f); kind != "" {
		return nil, fmt.Errorf("is %s, not a directory to work in", strings.Replace(kind, "a file of", "a directory of", 1))
	}
	if now, err := f.Stat(); err != nil || !os.SameFile(now, info) {
		return nil, errors.New("changed while it was checked")
	}
	return info, nil
}

// acpMaxMCPServers bounds the servers a client may give one session.
const acpMaxMCPServers = 64

// acpMCPServers reads the client's mcpServers (required: an array;
// optional for resume): stdio {name, command, args, env: [{name,
// value}]} and http {type: "http", name, url, headers: [{name, value}]};
// SSE servers are refused. They connect for this session (with the
// servers of pi's mcp.json, winning over an entry of the same name), with
// their tools declared to the model (direct); their values are taken as
// given, nothing expanded.
func acpMCPServers(p acpParams, required bool, cwd string) ([]mcpServerConfig, error) {
	if !required && !p.has("mcpServers") {
		return nil, nil
	}
	items, err := p.array("mcpServers", "an array of MCP servers")
	if err != nil {
		return nil, err
	}
	if len(items) > acpMaxMCPServers {
		return nil, invalidParams("Invalid field mcpServers: at most %d servers", acpMaxMCPServers)
	}
	var servers []mcpServerConfig
	for i, raw := range items {
		sp, err := paramsOf(raw, fmt.Sprintf("mcpServers[%d].", i))
		if err != nil {
			return nil, err
		}
		cfg := mcpServerConfig{source: "client", enabled: true, timeout: mcpDefaultTimeout, exposure: "direct", cwd: cwd}
		if cfg.name, err = sp.str("name"); err != nil {
			return nil, err
		}
		if !mcpServerName.get().MatchString(cfg.name) {
			return nil, invalidParams("Invalid field %s: a name has only letters, digits, _ and -, at most 40", sp.name("name"))
		}
		if slices.ContainsFunc(servers, func(o mcpServerConfig) bool { return o.name == cfg.name }) {
			return nil, invalidParams("Invalid field %s: %s is given twice", sp.name("name"), cfg.name)
		}
		if i := slices.IndexFunc(servers, func(o mcpServerConfig) bool { return mcpNamesClash(o.name, cfg.name) }); i >= 0 {
			return nil, invalidParams("Invalid field %s: %s: %s", sp.name("name"), cfg.name, mcpClash(cfg.name, servers[i].name))
		}
		kind, err := sp.optStr("type")
		if err != nil {
			return nil, err
		}
		allowed := []string{"name", "type", "url", "headers", "_meta"}
		if kind == "" {
			allowed = []string{"name", "command", "args", "env", "_meta"}
		}
		for _, key := range sp.r.keys() {
			if !slices.Contains(allowed, key) {
				return nil, invalidParams("Invalid field %s: not a field of a %s MCP server", sp.name(key), cmp.Or(kind, "stdio"))
			}
		}
		switch kind {
		case "sse":
			return nil, invalidParams("Invalid field %s: SSE MCP servers are not supported (mcpCapabilities.sse is false): use streamable HTTP (type http)", sp.name("type"))
		case "http":
			cfg.transport = "http"
			if cfg.url, err = sp.str("url"); err == nil {
				if u, perr := url.Parse(cfg.url); perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					err = invalidParams("Invalid field %s: must be an http or https URL", sp.name("url"))
				}
			}
			if err == nil {
				cfg.headers, err = acpNameValues(sp, "headers", httpHeaderName.get())
			}
		case "":
			cfg.transport = "stdio"
			if cfg.command, err = sp.str("command"); err == nil && cfg.command == "" {
				err = invalidParams("Invalid field %s: must not be empty", sp.name("command"))
			}
			if err == nil {
				cfg.args, err = acpStrings(sp, "args")
			}
			if err == nil {
				cfg.env, err = acpNameValues(sp, "env", envVariableName.get())
			}
			cfg.envSecrets = mcpStdioSecrets(cfg.args, cfg.env, nil) // the editor's values are literal: no !command here
		default:
			return nil, invalidParams("Invalid field %s: must be http or sse, or absent for a stdio server", sp.name("type"))
		}
		if err != nil {
			return nil, err
		}
		servers = append(servers, cfg)
	}
	return servers, nil
}

// acpStrings reads a required array of strings.
func acpStrings(p acpParams, field string) ([]string, error) {
	items, err := p.array(field, "an array of strings")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, raw := range items {
		var s string
		if raw[0] != '"' || !unquote(raw, &s) {
			return nil, paramError(invalid(p.name(field), "an array of strings"))
		}
		out = append(out, s)
	}
	return out, nil
}

// Names of what acpNameValues reads: an environment variable's, an HTTP
// header's (a token); compiled at first use, not in package init.
var (
	envVariableName = lazy[*regexp.Regexp]{build: func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) }}
	httpHeaderName  = lazy[*regexp.Regexp]{build: func() *regexp.Regexp { return regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$") }}
)

// acpNameValues reads a required array of {name, value} strings, as a
// map (a name given twice: its last value); names must match validName,
// values hold no NUL, CR or LF.
func acpNameValues(p acpParams, field string, validName *regexp.Regexp) (map[string]string, error) {
	items, err := p.array(field, "an array of {name, value}")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i, raw := range items {
		item, err := paramsOf(raw, fmt.Sprintf("%s[%d].", p.name(field), i))
		if err != nil {
			return nil, err
		}
		name, err := item.str("name")
		if err != nil {
			return nil, err
		}
		if !validName.MatchString(name) {
			return nil, invalidParams("Invalid field %s: %q is not a valid name", item.name("name"), name)
		}
		if out[name], err = item.str("value"); err != nil {
			return nil, err
		}
		if strings.ContainsAny(out[name], "\x00\r\n") {
			return nil, invalidParams("Invalid field %s: holds a NUL, CR or LF", item.name("value"))
		}
	}
	return out, nil
}

// session is the open session with the request's sessionId.
func (a *acpAgent) session(p acpParams) (*acpSession, error) {
	id, err := acpSessionID(p)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if as := a.sessions[id]; as != nil {
		return as, nil
	}
	return nil, invalidParams("Invalid field sessionId: no session with the id %s is open here (session/new, session/load or session/resume opens one)", id)
}

// isOpen reports whether the session with id is open in this process:
// on this connection, or by any front end of the host.
func (a *acpAgent) isOpen(id string) bool {
	a.mu.Lock()
	here := a.sessions[id] != nil
	a.mu.Unlock()
	return here || a.h.sessions.find(id) != nil
}
