package main

// An MCP tool call and its result as the model gets it: the arguments as
// the model gave them, the server's content converted as pi converts it,
// text past 20 KB cut in the middle.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// mcpCall is one call of an MCP tool: the arguments as the model gave
// them (an object; the server checks them against its schema).
type mcpCall struct {
	tool mcpTool
	args json.RawMessage
}

func (c *mcpCall) describe() (title, message string) {
	return "Allow MCP tool " + c.tool.server + ": " + escapeControl(c.tool.remote) + "?", "Arguments: " + escapeInJSON(string(c.args))
}

func (c *mcpCall) run(ctx context.Context, s *session, call toolRun) (toolResult, error) {
	conn, timeout, err := s.mcp.conn(c.tool.server)
	if err != nil {
		return toolResult{}, err
	}
	raw, err := s.mcp.ask(ctx, c.tool.server, conn, timeout, "tools/call", map[string]any{"name": c.tool.remote, "arguments": c.args}, true)
	if err != nil {
		return toolResult{}, err
	}
	var result struct {
		Content           []mcpContent    `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	if err := json.Unmarshal(raw, &result); err != nil {
		return toolResult{}, fmt.Errorf("MCP server %s answered tools/call with an invalid result: %v", c.tool.server, err)
	}
	content := mcpModelContent(result.Content, result.StructuredContent, s.mcp.readable(c.tool.server))
	details := map[string]string{"server": c.tool.server, "tool": c.tool.remote}
	if result.IsError { // an error with its images and details, as pi gives it
		if !slices.ContainsFunc(content, func(b contentBlock) bool { return b.Type == "text" && b.Text != "" }) {
			content = append(content, contentBlock{Type: "text", Text: fmt.Sprintf("MCP tool %s/%s returned an error", c.tool.server, c.tool.remote)})
		}
		return toolResult{}, &toolFailure{toolResult{Content: limitMCPContent(content), Details: details}}
	}
	return toolResult{Content: limitMCPContent(content), Details: details}, nil
}

// mcpContent is one content block of a tool's result.
type mcpContent struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Data        string `json:"data"`
	MimeType    string `json:"mimeType"`
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Size        *int   `json:"size"`
	Resource    *struct {
		URI      string  `json:"uri"`
		MimeType string  `json:"mimeType"`
		Text     *string `json:"text"`
		Blob     *string `json:"blob"`
	} `json:"resource"`
}

// mcpModelContent is what the model is given of a result, as pi gives
// it: text and images as they are, an embedded resource's text (or image,
// or a text-typed blob decoded), a note for what a model cannot take, and
// without content the structured content as indented JSON. A resource
// link says so, and, when readFrom names the server (its resources are
// readable), that read_mcp_resource reads it; rpi reads nothing it names.
func mcpModelContent(blocks []mcpContent, structured json.RawMessage, readFrom string) []contentBlock {
	var out []contentBlock
	text := func(t string) { out = append(out, contentBlock{Type: "text", Text: t}) }
	for _, b := range blocks {
		switch b.Type {
		case "text":
			text(b.Text)
		case "image":
			out = append(out, mcpImage(b.Data, b.MimeType))
		case "audio":
			text("[audio " + b.MimeType + " omitted]")
		case "resource_link":
			var details []string
			if b.MimeType != "" {
				details = append(details, b.MimeType)
			}
			if b.Size != nil {
				details = append(details, formatSize(*b.Size))
			}
			d := ""
			if len(details) > 0 {
				d = " (" + strings.Join(details, ", ") + ")"
			}
			desc := ""
			if b.Description != "" {
				desc = ": " + b.Description
			}
			read := ""
			if readFrom != "" {
				read = fmt.Sprintf(`. Read it with %s (server "%s")`, readMCPResourceTool.name, readFrom)
			}
			text(fmt.Sprintf(`[Resource %s "%s"%s%s%s]`, b.URI, cmp.Or(b.Title, b.Name), d, desc, read))
		case "resource":
			r := b.Resource
			switch {
			case r == nil:
				text("[unsupported MCP content resource]")
			case r.Text != nil:
				text(*r.Text)
			case r.Blob != nil && strings.HasPrefix(r.MimeType, "image/"):
				out = append(out, mcpImage(*r.Blob, r.MimeType))
			case r.Blob != nil && isTextMimeType(r.MimeType):
				data, err := base64.StdEncoding.DecodeString(*r.Blob)
				if err != nil {
					text(fmt.Sprintf("[binary resource %s (%s) omitted]", r.URI, cmp.Or(r.MimeType, "unknown type")))
				} else {
					text(string(data))
				}
			default:
				text(fmt.Sprintf("[binary resource %s (%s) omitted]", r.URI, cmp.Or(r.MimeType, "unknown type")))
			}
		default:
			text("[unsupported MCP content " + b.Type + "]")
		}
	}
	if len(blocks) == 0 && len(structured) > 0 && string(structured) != "null" {
		var v any
		if json.Unmarshal(structured, &v) == nil {
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			enc.Encode(v)
			text(strings.TrimSuffix(b.String(), "\n"))
		}
	}
	return out
}

// mcpImage is an image block of a result, if it is one a model takes
// (base64Image); else a note.
func mcpImage(data, mimeType string) contentBlock {
	if img, ok := base64Image(data); ok {
		return img
	}
	return contentBlock{Type: "text", Text: "[image " + escapeControl(mimeType) + " omitted: not an image a model takes]"}
}

// isTextMimeType reports whether a blob of that type is text.
func isTextMimeType(mimeType string) bool {
	t := strings.ToLower(strings.TrimSpace(strings.SplitN(mimeType, ";", 2)[0]))
	return strings.HasPrefix(t, "text/") || t == "application/json" || strings.HasSuffix(t, "+json") || strings.HasSuffix(t, "+xml")
}

// maxMCPText is how much of a result's text the model gets (pi's 20 KB):
// longer text keeps its start and end.
const maxMCPText = 20 << 10

func joinTexts(content []contentBlock) string {
	var texts []string
	for _, b := range content {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// limitMCPContent keeps a result's text within maxMCPText, as pi does:
// longer text becomes one block cut in the middle, the images follow.
func limitMCPContent(content []contentBlock) []contentBlock {
	for i := range content {
		content[i].Text = strings.ToValidUTF8(content[i].Text, "\uFFFD")
	}
	combined := joinTexts(content)
	if len(combined) <= maxMCPText {
		if content == nil {
			return []contentBlock{}
		}
		return content
	}
	out := []contentBlock{{Type: "text", Text: limitMCPText(combined)}}
	for _, b := range content {
		if b.Type == "image" {
			out = append(out, b)
		}
	}
	return out
}

// limitMCPText cuts text longer than maxMCPText in the middle, at
// character boundaries, with pi's note of what was cut.
func limitMCPText(text string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	if len(text) <= maxMCPText {
		return text
	}
	head := maxMCPText / 2
	for head > 0 && !utf8.RuneStart(text[head]) {
		head--
	}
	tail := len(text) - (maxMCPText - maxMCPText/2)
	for tail < len(text) && !utf8.RuneStart(text[tail]) {
		tail++
	}
	lines := strings.Count(text, "\n") + 1
	if strings.HasSuffix(text, "\n") {
		lines--
	}
	return fmt.Sprintf("Warning: truncated output (original token count: %d)\nTotal output lines: %d\n\n%s…%d chars truncated…%s",
		(len(text)+3)/4, lines, text[:head], utf8.RuneCountInString(text[head:tail]), text[tail:])
}

// maxMCPSchema bounds one tool's input schema (every request declares it).
const maxMCPSchema = 256 << 10

// mcpArguments is what rpi checks an MCP tool's arguments against: one
// JSON object, no key twice; the server checks them against its schema.
var mcpArguments = json.RawMessage(`{"type":"object","additionalProperties":{}}`)

// mcpInputSchema is a tool's input schema as the model is given it: the
// server's, its members in the server's order and its numbers as written
// (as pi passes it on), type object and properties added at the end when
// missing; anything but a JSON object, or a schema of another type
// (which a model's API refuses, failing every request that declares it),
// is refused.
func mcpInputSchema(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) > maxMCPSchema {
		return nil, fmt.Errorf("its inputSchema is larger than %d KiB", maxMCPSchema>>10)
	}
	var schema jsonObject
	if len(raw) > 0 && schema.UnmarshalJSON(raw) != nil {
		return nil, errors.New("its inputSchema is not a JSON object")
	}
	var kind any
	if t := schema.get("type"); t == nil {
		schema.set("type", json.RawMessage(`"object"`))
	} else if json.Unmarshal(t, &kind) != nil || kind != "object" {
		return nil, errors.New(`its inputSchema's type is not "object"`)
	}
	if schema.get("properties") == nil {
		schema.set("properties", json.RawMessage(`{}`))
	}
	data, err := json.Marshal(&schema) // compacted
	if err != nil {
		return nil, errors.New("its inputSchema is not a JSON object")
	}
	return data, nil
}

// maxMCPNameTries bounds the numbered names mcpToolName tries for a
// tool whose hashed name is taken: a server can take them all, by naming
// its other tools so, and would make each listing cost as many tries as
// names it had taken, for each such tool.
const maxMCPNameTries = 16

// mcpToolName is the model's name of a server's tool, as pi makes it:
// mcp__<server>__<tool> with every character outside [A-Za-z0-9_] as _,
// and, when longer than 64 characters or taken by another tool, cut and
// ended with _ and 8 hex digits of a hash of the two names; when that is
// taken too, 4 of the digits and a number; "" when all maxMCPNameTries
// numbers are taken.
func mcpToolName(server, tool string, taken func(string) bool) string {
	name := mcpSanitize("mcp__" + server + "__" + tool)
	if len(name) <= 64 && !taken(name) {
		return name
	}
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	hash := hex.EncodeToString(sum[:])[:8]
	hashed := name[:min(len(name), 64-len(hash)-1)] + "_" + hash
	for n := 2; taken(hashed); n++ { // a tool named as another's hashed name: pi's rule meets itself
		if n > maxMCPNameTries {
			return ""
		}
		suffix := fmt.Sprintf("_%s%d", hash[:4], n)
		hashed = name[:min(len(name), 64-len(suffix))] + suffix
	}
	return hashed
}

// mcpSanitize writes every character outside [A-Za-z0-9_] as _.
func mcpSanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 128 && (r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
