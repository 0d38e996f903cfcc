package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// The rpc wire (docs/protocol.md): a command line decoded into a request
// (its id, type and fields), the envelope of responses and events in
// rpi's own shape (rpcWire; pi's is rpc_pi.go), and a response that
// cannot be encoded made a failure.

// A wire is the shape the rpc front end gives its records: the default
// envelope (rpcWire, below) or pi 1.6's flat one (piWire, rpc_pi.go,
// docs/pi-compat.md). A wire of this family is one value of this interface; a protocol
// of another family (ACP, docs/acp.md) is a front end of its own over the
// same core (session.go's session), with its own records.
type wire interface {
	// name is what get_capabilities reports as compat.
	name() string
	// sends says whether the wire has ev at all.
	sends(ev event) bool
	// appendEvent appends an event record.
	appendEvent(buf []byte, ev event) ([]byte, error)
	// appendResponse appends the response to a command: success with
	// data, or failure with failure's text.
	appendResponse(buf []byte, id json.RawMessage, command string, data any, failure error) ([]byte, error)
	// numericIDs says a command's id may also be a number, echoed as sent.
	numericIDs() bool
	// lenientUIResponses says an extension_ui_response may give more or
	// fewer than one answer, and one for no open dialog is ignored.
	lenientUIResponses() bool
}

// rpcWire is rpi's own shape: {"type":T,"data":{…}} events, and responses
// that always carry data on success.
type rpcWire struct{}

func (rpcWire) name() string     { return "rpi" }
func (rpcWire) sends(event) bool { return true }

func (rpcWire) numericIDs() bool { return false }

func (rpcWire) lenientUIResponses() bool { return false }

// appendEvent appends {"type":T,"data":{…}}, or {"type":T} without data.
func (rpcWire) appendEvent(buf []byte, ev event) ([]byte, error) {
	data := ev.Data
	if _, ok := data.(runSettled); ok {
		data = nil // rpi's own agent_settled has none (pi's says whether it was aborted)
	}
	buf = append(buf, `{"type":`...)
	buf = appendJSONString(buf, ev.Type)
	if data == nil {
		return append(buf, '}'), nil
	}
	buf = append(buf, `,"data":`...)
	buf, err := appendPayload(buf, data)
	return append(buf, '}'), err
}

// appendResponse appends a response whose success always has data (null
// when none; a piOnly's otherwise).
func (rpcWire) appendResponse(buf []byte, id json.RawMessage, command string, data any, failure error) ([]byte, error) {
	buf = appendResponseHead(buf, id, command)
	if failure != nil {
		return appendFailure(buf, failure), nil
	}
	if p, ok := data.(piOnly); ok {
		data = p.otherwise
	}
	buf = append(buf, `,"success":true,"data":`...)
	if data == nil {
		return append(buf, `null}`...), nil
	}
	buf, err := appendPayload(buf, data)
	return append(buf, '}'), err
}

// appendFailure appends the failure members that close a response.
func appendFailure(buf []byte, failure error) []byte {
	buf = append(buf, `,"success":false,"error":`...)
	buf = appendJSONString(buf, failure.Error())
	return append(buf, '}')
}

// encodeResponse appends a response in w's shape. Data that cannot be
// encoded (a bug) makes the response a failure that says so, so that
// every command still gets its one answer.
func encodeResponse(w wire, buf []byte, id json.RawMessage, command string, data any, failure error) ([]byte, error) {
	mark := len(buf)
	out, err := w.appendResponse(buf, id, command, data, failure)
	if err != nil {
		failure = fmt.Errorf("Internal error in %s: its answer cannot be encoded (%v)", command, err)
		return w.appendResponse(buf[:mark], id, command, nil, failure)
	}
	return out, nil
}

// appendResponseHead appends a response's first members: its id (when it
// has one), type and command.
func appendResponseHead(buf []byte, id json.RawMessage, command string) []byte {
	buf = append(buf, '{')
	if id != nil {
		buf = append(buf, `"id":`...)
		buf = append(buf, id...)
		buf = append(buf, ',')
	}
	buf = append(buf, `"type":"response","command":`...)
	return appendJSONString(buf, command)
}

// rpcRequest is one decoded command line. Its fields stay raw JSON, found by
// exact key, and are decoded only when a handler asks for them.
type rpcRequest struct {
	id  json.RawMessage // as sent, or nil when absent or null
	typ string
	fields
}

// A requestError is a failure to answer before the command is known.
type requestError struct {
	id      json.RawMessage
	command string
	message string
}

// decodeRequest checks a line in docs/protocol.md's order: JSON object, type, id. It
// takes one pass over the line (scanObject); a line that pass cannot
// accept is decoded again by encoding/json, whose error text is the
// answer. With numericIDs (pi-compatible mode, docs/pi-compat.md) an id may also be a
// number, echoed as sent, as pi does. The request is decoded into r,
// whatever r held before.
func decodeRequest(line []byte, numericIDs bool, r *rpcRequest) (*rpcRequest, *requestError) {
	parseFailure := func(detail string) *requestError {
		return &requestError{command: "parse", message: "Failed to parse command: " + detail}
	}
	if !utf8.Valid(line) {
		return nil, parseFailure("invalid UTF-8")
	}
	*r = rpcRequest{}
	members, ok := scanObject(line, r.room[:0])
	if !ok {
		var fields map[string]json.RawMessage
		err := json.Unmarshal(line, &fields)
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr):
			return nil, parseFailure("expected a JSON object, got " + typeErr.Value)
		case err != nil:
			return nil, parseFailure(err.Error())
		case fields == nil:
			return nil, parseFailure("expected a JSON object, got null")
		}
		// Valid, but beyond what scanObject takes (deep nesting): keep
		// encoding/json's view.
		members = members[:0]
		for k, v := range fields {
			members = append(members, member{[]byte(k), v})
		}
	}
	r.members = members
	rawID, hasID := r.field("id")
	idIsString := hasID && (rawID[0] == '"' || numericIDs && (rawID[0] == '-' || rawID[0] >= '0' && rawID[0] <= '9'))
	rawType, _ := r.field("type")
	if len(rawType) == 0 || rawType[0] != '"' || !commandType(rawType, &r.typ) {
		e := &requestError{command: "parse", message: "Missing or invalid field: type"}
		if idIsString {
			e.id = rawID
		}
		return nil, e
	}
	if hasID && !idIsString && string(rawID) != "null" {
		if numericIDs {
			return nil, &requestError{id: rawID, command: r.typ, message: "Invalid field id: must be a string or a number"}
		}
		return nil, &requestError{id: rawID, command: r.typ, message: "Invalid field id: must be a string"}
	}
	if idIsString {
		r.id = rawID
	}
	return r, nil
}

// commandType decodes a request's type, a JSON string, into name. A
// known command's name is the one commandNames holds, not a new string.
func commandType(raw []byte, name *string) bool {
	if known, ok := commandNames.get()[string(raw[1:len(raw)-1])]; ok {
		*name = known
		return true
	}
	return unquote(raw, name)
}

// commandNames holds each command's name once, so that reading a known
// command's type allocates nothing.
var commandNames = lazy[map[string]string]{build: func() map[string]string {
	names := make(map[string]string, len(rpcCommands()))
	for name := range rpcCommands() {
		names[name] = name
	}
	return names
}}

// heldCopy is a copy of r that its handler may keep: r may be the
// connection's one request for queries, which the next line's decode
// overwrites (handleFrame).
func (r *rpcRequest) heldCopy() *rpcRequest {
	c := &rpcRequest{id: r.id, typ: r.typ}
	c.members = append(c.room[:0], r.members...)
	return c
}

// idString is the request's id as a string (a numeric id of pi's mode
// as written), or nil when it had none.
func (r *rpcRequest) idString() *string {
	if r.id == nil {
		return nil
	}
	s := string(r.id)
	if r.id[0] == '"' {
		json.Unmarshal(r.id, &s)
	}
	return &s
}

// piOnly is success data whose shape differs in pi's mode: data there,
// otherwise (nil: null) on rpi's own wire — prompt's disposition, a
// cancelled bash without exitCode.
type piOnly struct{ data, otherwise any }
