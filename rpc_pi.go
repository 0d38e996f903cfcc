package main

// pi 1.6's shapes (docs/pi-compat.md), the wire rpi speaks with --compat pi, RPI_COMPAT=pi
// or when run as "pi": every event flat ({"type":T,…fields}), a success
// without data when it has none, the shapes of their own that some events
// and answers have there (an event's Pi payload, a piOnly answer), numeric
// ids, and pi's leniency with extension_ui_response. It is the rpc front
// end with another wire value: the commands and the core are the same.

import (
	"encoding/json"
	"fmt"
)

// piWire is pi 1.6's wire.
type piWire struct{}

func (piWire) name() string             { return "pi" }
func (piWire) numericIDs() bool         { return true }
func (piWire) lenientUIResponses() bool { return true }

// sends leaves out rpi's own events that pi's RPC has no counterpart
// of: mcp_server_update (a pi client asks with get_mcp_servers).
func (piWire) sends(ev event) bool {
	_, mcp := ev.Data.(mcpServerUpdate)
	return !mcp
}

// appendEvent appends {"type":T,…fields}: the payload's fields (in pi's
// order and names where they differ: message_update, bash_execution_update)
// follow "type" in the same object.
func (piWire) appendEvent(buf []byte, ev event) ([]byte, error) {
	data := ev.Data
	switch d := data.(type) {
	case messageUpdate:
		data = piMessageUpdate{d.Usage, d.AssistantMessageEvent}
	case bashUpdate:
		data = piBashUpdate{d.rawID, d.Chunk}
	}
	buf = append(buf, `{"type":`...)
	buf = appendJSONString(buf, ev.Type)
	if data == nil {
		return append(buf, '}'), nil
	}
	mark := len(buf)
	buf, err := appendPayload(buf, data)
	if err != nil {
		return nil, err
	}
	if len(buf)-mark < 2 || buf[mark] != '{' {
		return nil, fmt.Errorf("event %s: payload is not an object", ev.Type)
	}
	if len(buf)-mark == 2 { // {}
		buf = buf[:mark]
	} else {
		buf[mark] = ','
		buf = buf[:len(buf)-1]
	}
	return append(buf, '}'), nil
}

// appendResponse appends a response whose success has data only when it
// is not null (a piOnly's data).
func (piWire) appendResponse(buf []byte, id json.RawMessage, command string, data any, failure error) ([]byte, error) {
	buf = appendResponseHead(buf, id, command)
	if failure != nil {
		return appendFailure(buf, failure), nil
	}
	if p, ok := data.(piOnly); ok {
		data = p.data
	}
	buf = append(buf, `,"success":true`...)
	if data == nil {
		return append(buf, '}'), nil
	}
	buf = append(buf, `,"data":`...)
	buf, err := appendPayload(buf, data)
	return append(buf, '}'), err
}

// disposition is what pi 1.6 answers prompt, steer and follow_up with.
type disposition struct {
	Disposition string `json:"disposition"`
}

// piMessageUpdate is message_update in pi's order (usage first).
type piMessageUpdate struct {
	Usage                 usage          `json:"usage"`
	AssistantMessageEvent assistantEvent `json:"assistantMessageEvent"`
}

// piBashUpdate is bash_execution_update in pi's shape: the request's id
// as sent (numbers too) and the text.
type piBashUpdate struct {
	ID    json.RawMessage `json:"id,omitempty"`
	Delta string          `json:"delta"`
}

func (u piBashUpdate) appendJSON(buf []byte) []byte {
	buf = append(buf, '{')
	if u.ID != nil {
		buf = append(buf, `"id":`...)
		buf = append(buf, u.ID...)
		buf = append(buf, ',')
	}
	buf = append(buf, `"delta":`...)
	buf = appendJSONString(buf, u.Delta)
	return append(buf, '}')
}

// piBashResult is bash's answer in pi's shape: one merged output, no
// exitCode when it was cancelled.
type piBashResult struct {
	Output         string `json:"output"`
	ExitCode       *int   `json:"exitCode,omitempty"`
	Cancelled      bool   `json:"cancelled"`
	Truncated      bool   `json:"truncated"`
	FullOutputPath string `json:"fullOutputPath,omitempty"`
}

func (m piMessageUpdate) finiteJSON() bool { return m.Usage.finiteJSON() }

func (m piMessageUpdate) appendJSON(buf []byte) []byte {
	buf = append(buf, '{')
	buf = appendKey(buf, "usage")
	buf = m.Usage.appendJSON(buf)
	buf = appendKey(buf, "assistantMessageEvent")
	buf = m.AssistantMessageEvent.appendJSON(buf)
	return append(buf, '}')
}

// bashUpdate is the data of a bash_execution_update event; pi writes
// {id, delta} (docs/pi-compat.md).
type bashUpdate struct {
	RequestID *string         `json:"requestId"`
	Stream    string          `json:"stream"`
	Chunk     string          `json:"chunk"`
	rawID     json.RawMessage // the request's id as sent (pi's shape has it, numbers too)
}
