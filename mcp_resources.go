package main

// An MCP server's resources as the model reaches them, with pi's tools:
// list_mcp_resources, list_mcp_resource_templates and read_mcp_resource
// (pi's names, arguments and results). They reach the servers connected
// that said they have resources, and are declared with the widest
// exposure of those servers (direct, else left to tool_search).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The three tools, with pi's names, descriptions and parameters. Each
// decode names its tool with a constant: a closure over a variable (of a
// shared constructor) would be built in package init, where these are
// data the compiler lays out.
var (
	listMCPResourcesTool = &tool{
		name:    listMCPResources,
		summary: "List the resources MCP servers offer",
		description: "Lists resources provided by MCP servers. Resources allow servers to share data that provides context to language models, " +
			"such as files, database schemas, or application-specific information. Prefer resources over web search when possible.",
		schema: json.RawMessage(mcpListParameters),
		decode: func(s *session, raw json.RawMessage) (toolCall, error) {
			return decodeResourceCall(listMCPResources, raw)
		},
	}
	listMCPResourceTemplatesTool = &tool{
		name:    listMCPResourceTemplates,
		summary: "List the resource templates MCP servers offer",
		description: "Lists resource templates provided by MCP servers. Parameterized resource templates allow servers to share data that takes " +
			"parameters and provides context to language models, such as files, database schemas, or application-specific information. " +
			"Prefer resource templates over web search when possible.",
		schema: json.RawMessage(mcpListParameters),
		decode: func(s *session, raw json.RawMessage) (toolCall, error) {
			return decodeResourceCall(listMCPResourceTemplates, raw)
		},
	}
	readMCPResourceTool = &tool{
		name:        readMCPResource,
		summary:     "Read a resource of an MCP server",
		description: "Read a specific resource from an MCP server given the server name and resource URI.",
		schema: json.RawMessage(`{"type":"object","properties":{"server":{"type":"string","description":"MCP server name exactly as configured. ` +
			`Must match the 'server' field returned by list_mcp_resources."},"uri":{"type":"string","description":"Resource URI to read. ` +
			`Must be one of the URIs returned by list_mcp_resources."}},"required":["server","uri"],"additionalProperties":false}`),
		decode: func(s *session, raw json.RawMessage) (toolCall, error) {
			return decodeResourceCall(readMCPResource, raw)
		},
	}
	mcpResourceTools     = []*tool{listMCPResourcesTool, listMCPResourceTemplatesTool, readMCPResourceTool}
	mcpResourceToolNames = []string{listMCPResources, listMCPResourceTemplates, readMCPResource}
)

// The resource tools' names, as pi names them.
const (
	listMCPResources         = "list_mcp_resources"
	listMCPResourceTemplates = "list_mcp_resource_templates"
	readMCPResource          = "read_mcp_resource"
)

// mcpListParameters are the parameters of the two list tools.
const mcpListParameters = `{"type":"object","properties":{"server":{"type":"string","description":"MCP server name. ` +
	`Omit to list every server with resources."},"cursor":{"type":"string","description":"Opaque cursor from a previous call with the same ` +
	`server; omit for the first page."}},"additionalProperties":false}`

// resourceCall is one call of a resource tool.
type resourceCall struct {
	tool                string
	server, cursor, uri string
}

func decodeResourceCall(name string, raw json.RawMessage) (toolCall, error) {
	var args struct{ Server, Cursor, URI string }
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, err
	}
	return &resourceCall{tool: name, server: strings.TrimSpace(args.Server), cursor: strings.TrimSpace(args.Cursor), uri: strings.TrimSpace(args.URI)}, nil
}

func (c *resourceCall) describe() (string, string) {
	return "Allow " + c.tool + "?", "Server: " + escapeControl(c.server) + "\nURI: " + escapeControl(c.uri)
}

// resourceExposureLocked is the widest exposure of the connected servers
// with resources ("" for none): direct, else codemode, else deferred.
func (m *mcpServers) resourceExposureLocked() string {
	widest := ""
	for _, srv := range m.on {
		if srv.state != "connected" || !srv.hasResources {
			continue
		}
		switch e := srv.cfg.exposure; {
		case e == "direct":
			return e
		case e == "codemode", e == "deferred" && widest == "":
			widest = e
		}
	}
	return widest
}

// readable is server, if its resources are readable (read_mcp_resource
// reaches them: it is connected, has resources, and its exposure is not
// hidden), else "".
func (m *mcpServers) readable(server string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, srv := range m.on {
		if srv.cfg.name == server && srv.state == "connected" && srv.hasResources && srv.cfg.exposure != "hidden" {
			return server
		}
	}
	return ""
}

// resourceServer is a server with resources as a call found it: its
// connection then (a reconnect does not change it under the call).
type resourceServer struct {
	name    string
	conn    *mcpConn
	timeout time.Duration
	servers *mcpServers
}

// request asks srv method (mcpServers.ask: once more on a new connection
// when the server has forgotten the session).
func (srv resourceServer) request(ctx context.Context, method string, params map[string]any) (json.RawMessage, error) {
	return srv.servers.ask(ctx, srv.name, srv.conn, srv.timeout, method, params, false)
}

// resourceServers are the connected servers with resources whose exposure
// is not hidden, by name.
func (m *mcpServers) resourceServers() []resourceServer {
	m.mu.Lock()
	defer m.mu.Unlock()
	var list []resourceServer
	for _, srv := range m.on {
		if srv.state == "connected" && srv.conn != nil && srv.hasResources && srv.cfg.exposure != "hidden" {
			list = append(list, resourceServer{srv.cfg.name, srv.conn, srv.cfg.timeout, m})
		}
	}
	slices.SortFunc(list, func(a, b resourceServer) int { return strings.Compare(a.name, b.name) })
	return list
}

func (c *resourceCall) run(ctx context.Context, s *session, call toolRun) (toolResult, error) {
	servers := s.mcp.resourceServers()
	find := func(name string) (resourceServer, error) {
		if i := slices.IndexFunc(servers, func(srv resourceServer) bool { return srv.name == name }); i >= 0 {
			return servers[i], nil
		}
		var names []string
		for _, srv := range servers {
			names = append(names, srv.name)
		}
		available := ""
		if len(names) > 0 {
			available = ". Servers with resources: " + strings.Join(names, ", ")
		}
		return resourceServer{}, fmt.Errorf("MCP server %q has no resources%s", name, available)
	}
	details := map[string]string{"server": c.server, "tool": c.tool}
	if c.tool == "read_mcp_resource" {
		switch {
		case c.server == "":
			return toolResult{}, errors.New("server must be provided")
		case c.uri == "":
			return toolResult{}, errors.New("uri must be provided")
		}
		srv, err := find(c.server)
		if err != nil {
			return toolResult{}, err
		}
		return readResource(ctx, srv, c.uri, details)
	}
	method, key := "resources/list", "resources"
	if c.tool == "list_mcp_resource_templates" {
		method, key = "resources/templates/list", "resourceTemplates"
	}
	var payload bytes.Buffer
	if c.server != "" {
		srv, err := find(c.server)
		if err != nil {
			return toolResult{}, err
		}
		items, next, err := listPage(ctx, srv, method, key, c.cursor)
		if err != nil {
			return toolResult{}, err
		}
		fmt.Fprintf(&payload, `{"server":%s,%q:[%s]`, jsonText(srv.name), key, bytes.Join(items, []byte(",")))
		if next != "" {
			fmt.Fprintf(&payload, `,"nextCursor":%s`, jsonText(next))
		}
		payload.WriteByte('}')
	} else {
		if c.cursor != "" {
			return toolResult{}, errors.New("cursor can only be used when a server is specified")
		}
		var all [][]byte
		var failures []string
		for _, srv := range servers {
			items, err := listAll(ctx, srv, method, key)
			if err != nil {
				failures = append(failures, fmt.Sprintf(`{"server":%s,"error":%s}`, jsonText(srv.name), jsonText(err.Error())))
				continue
			}
			all = append(all, items...)
		}
		fmt.Fprintf(&payload, `{%q:[%s]`, key, bytes.Join(all, []byte(",")))
		if len(failures) > 0 {
			fmt.Fprintf(&payload, `,"errors":[%s]`, strings.Join(failures, ","))
		}
		payload.WriteByte('}')
	}
	return toolResult{Content: limitMCPContent(textBlocks(payload.String())), Details: details}, nil
}

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// maxMCPResourceList bounds the items of one server's listing, every
// page of it: the model gets 20 KB of it.
const maxMCPResourceList = 8 << 20

// listAll is every page of a server's list, each item as listed gives it.
func listAll(ctx context.Context, srv resourceServer, method, key string) ([][]byte, error) {
	var all [][]byte
	cursor, listed := "", 0
	cursors := map[string]bool{} // a cursor given twice would list the same pages again (pi fails it too)
	for page := 0; page < maxMCPToolPages; page++ {
		items, next, err := listPage(ctx, srv, method, key, cursor)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			listed += len(item)
		}
		if listed > maxMCPResourceList {
			what := "resources"
			if key == "resourceTemplates" {
				what = "resource templates"
			}
			return nil, fmt.Errorf("MCP server %s listed more than %d MiB of %s", srv.name, maxMCPResourceList>>20, what)
		}
		all = append(all, items...)
		if cursor = next; cursor == "" {
			return all, nil
		}
		if cursors[cursor] {
			return nil, fmt.Errorf("MCP server %s answered %s with the nextCursor %q it gave before", srv.name, method, clip(cursor, 64))
		}
		cursors[cursor] = true
	}
	return nil, fmt.Errorf("MCP %s exceeded %d pages", method, maxMCPToolPages) // pi's text (pi's bound is 1,000)
}

// listPage is one page of a server's resources or templates, each item
// {server, …its fields} without _meta and icons, an MCP app's own UI
// resources left out (as pi leaves them out).
func listPage(ctx context.Context, srv resourceServer, method, key, cursor string) (items [][]byte, next string, err error) {
	params := map[string]any{}
	if cursor != "" {
		params["cursor"] = cursor
	}
	raw, err := srv.request(ctx, method, params)
	if err != nil {
		return nil, "", err
	}
	var page map[string]json.RawMessage
	if err := json.Unmarshal(raw, &page); err != nil {
		return nil, "", fmt.Errorf("MCP server %s answered %s with an invalid result", srv.name, method)
	}
	var list []json.RawMessage
	json.Unmarshal(page[key], &list)
	json.Unmarshal(page["nextCursor"], &next)
	for _, item := range list {
		if listed, ok := listedItem(srv.name, item); ok {
			items = append(items, listed)
		}
	}
	return items, next, nil
}

var mcpAppProfile = lazy[*regexp.Regexp]{build: func() *regexp.Regexp { return regexp.MustCompile(`(?i);\s*profile\s*=\s*"?mcp-app"?`) }}

// listedItem is item as pi lists it: {"server":name, …its fields in
// their order}, without _meta and icons; false for an object that is
// not one, or an MCP app's UI resource.
func listedItem(server string, item json.RawMessage) ([]byte, bool) {
	var fields struct {
		URI         string `json:"uri"`
		URITemplate string `json:"uriTemplate"`
		MimeType    string `json:"mimeType"`
	}
	if json.Unmarshal(item, &fields) != nil {
		return nil, false
	}
	if uri := cmp.Or(fields.URI, fields.URITemplate); strings.HasPrefix(uri, "ui://") || mcpAppProfile.get().MatchString(fields.MimeType) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(item))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	out := []byte(`{"server":` + jsonText(server))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, false
		}
		if key == "_meta" || key == "icons" || key == "server" {
			continue
		}
		var compact bytes.Buffer
		json.Compact(&compact, value)
		out = append(out, ',')
		out = append(out, jsonText(key)...)
		out = append(out, ':')
		out = append(out, compact.Bytes()...)
	}
	return append(out, '}'), true
}

// readResource reads uri from srv: its contents as pi gives them to the
// model (several labelled with their URIs), or a note that it is empty.
func readResource(ctx context.Context, srv resourceServer, uri string, details map[string]string) (toolResult, error) {
	raw, err := srv.request(ctx, "resources/read", map[string]any{"uri": uri})
	if err != nil {
		return toolResult{}, err
	}
	var result struct {
		Contents []json.RawMessage `json:"contents"`
	}
	if err := json.Unmarshal(raw, &result); err != nil {
		return toolResult{}, fmt.Errorf("MCP server %s answered resources/read with an invalid result", srv.name)
	}
	var blocks []mcpContent
	for _, c := range result.Contents {
		var block mcpContent
		if json.Unmarshal([]byte(`{"type":"resource","resource":`+string(c)+`}`), &block) != nil || block.Resource == nil {
			continue
		}
		if len(result.Contents) > 1 {
			blocks = append(blocks, mcpContent{Type: "text", Text: block.Resource.URI + ":"})
		}
		blocks = append(blocks, block)
	}
	content := mcpModelContent(blocks, nil, "")
	if len(content) == 0 {
		content = textBlocks("Resource " + uri + " is empty.")
	}
	return toolResult{Content: limitMCPContent(content), Details: details}, nil
}
