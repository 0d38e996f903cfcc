package main

// The tool_search tool, as pi 1.6 has it: tools that are not declared to
// the model (MCP tools with deferred exposure, or pi's default codemode,
// which rpi treats as deferred) are ranked against the model's query with
// BM25 over their names, descriptions and parameters, and the matches are
// declared from the model's next request on.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"
)

// toolSearchLimit is how many tools a search loads unless told.
const toolSearchLimit = 8

// maxToolSearchLimit bounds a tool_search limit (pi has no bound).
const maxToolSearchLimit = 1000

var toolSearchTool = &tool{
	name:    "tool_search",
	summary: "Search for tools that are not loaded yet and load the matches",
	description: "# Tool discovery\n\nSearches over deferred tool metadata with BM25 and exposes matching tools for the next model call.\n\n" +
		"Some of the tools, such as tools of MCP servers, may not have been provided to you upfront, and you should use this tool " +
		"(`tool_search`) to search for the required tools. For MCP tool discovery, always use `tool_search`.",
	schema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"Search query for deferred tools."},` +
		`"limit":{"type":"number","description":"Maximum number of tools to return. Defaults to 8."}},"required":["query"]}`),
	decode: func(s *session, raw json.RawMessage) (toolCall, error) {
		var args struct {
			Query string   `json:"query"`
			Limit *float64 `json:"limit"`
		}
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, err
		}
		limit := toolSearchLimit
		if args.Limit != nil {
			switch {
			case *args.Limit <= 0 || *args.Limit != math.Trunc(*args.Limit):
				return nil, fmt.Errorf("limit must be a positive integer")
			case *args.Limit > maxToolSearchLimit: // rpi's bound: pi has none
				return nil, fmt.Errorf("limit must be at most %d", maxToolSearchLimit)
			}
			limit = int(*args.Limit)
		}
		if strings.TrimSpace(args.Query) == "" {
			return nil, fmt.Errorf("query must not be empty")
		}
		return &toolSearchCall{query: args.Query, limit: limit}, nil
	},
}

type toolSearchCall struct {
	query string
	limit int
}

func (c *toolSearchCall) describe() (string, string) {
	return "Allow tool_search?", "Search: " + escapeControl(c.query)
}

// run waits for the servers still connecting (as pi's tool_search does),
// ranks the tools not declared yet and loads the best.
func (c *toolSearchCall) run(ctx context.Context, s *session, call toolRun) (toolResult, error) {
	s.mcp.awaitAll(ctx)
	loaded := s.mcp.search(c.query, c.limit)
	if len(loaded) == 0 {
		return toolResult{Content: textBlocks("No matching tools found."), Details: map[string]any{"loaded": []string{}}}, nil
	}
	var b strings.Builder
	plural := "s"
	if len(loaded) == 1 {
		plural = ""
	}
	fmt.Fprintf(&b, "Loaded %d tool%s. They are available from your next call:", len(loaded), plural)
	var names []string
	for _, t := range loaded {
		first, _, _ := strings.Cut(strings.TrimSpace(t.description), "\n")
		fmt.Fprintf(&b, "\n- %s: %s", t.name, strings.TrimSuffix(first, "\r"))
		names = append(names, t.name)
	}
	return toolResult{Content: textBlocks(b.String()), Details: map[string]any{"loaded": names}}, nil
}

// searchDoc is what a tool is searched by.
type searchDoc struct {
	name           string
	nameTerms      map[string]bool
	localNameTerms []string // of the name's last __ part
	*searchText
	namespaceTerms map[string]bool
}

// searchText is the terms of a tool's description and parameters: the
// costly part of its searchDoc (a server may list 8 MiB of them), made
// once as the tool is listed, outside any lock, and only read after.
type searchText struct {
	textCounts map[string]int
	textLength int
}

// newSearchDoc indexes a tool: its name; its description and its
// parameters' names and descriptions; its server's name and description.
func newSearchDoc(t *tool, namespace string) searchDoc {
	return searchDocOf(t.name, newSearchText(t), namespaceTerms(namespace))
}

// newSearchText indexes a tool's description and its parameters' names
// and descriptions.
func newSearchText(t *tool) *searchText {
	parts := []string{t.description}
	var schema any
	json.Unmarshal(t.schema, &schema)
	schemaText(schema, &parts, 0)
	text := &searchText{textCounts: map[string]int{}}
	for _, term := range searchTerms(strings.Join(parts, " ")) {
		text.textCounts[term]++
		text.textLength++
	}
	return text
}

// namespaceTerms is the terms of a server's name and description, shared
// by the searchDocs of its tools.
func namespaceTerms(namespace string) map[string]bool {
	terms := map[string]bool{}
	for _, term := range searchTerms(namespace) {
		terms[term] = true
	}
	return terms
}

// searchDocOf is the searchDoc of the tool named name, of its text and
// its server's terms.
func searchDocOf(name string, text *searchText, namespace map[string]bool) searchDoc {
	d := searchDoc{name: name, nameTerms: map[string]bool{}, searchText: text, namespaceTerms: namespace}
	for _, term := range searchTerms(name) {
		d.nameTerms[term] = true
	}
	segments := strings.Split(name, "__")
	for _, term := range searchTerms(segments[len(segments)-1]) {
		if !slices.Contains(d.localNameTerms, term) {
			d.localNameTerms = append(d.localNameTerms, term)
		}
	}
	return d
}

// schemaText adds a schema's descriptions and property names, nested
// ones too (to a bounded depth).
func schemaText(schema any, parts *[]string, depth int) {
	obj, ok := schema.(map[string]any)
	if !ok || depth > 32 {
		return
	}
	if d, ok := obj["description"].(string); ok {
		*parts = append(*parts, d)
	}
	if props, ok := obj["properties"].(map[string]any); ok {
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			*parts = append(*parts, name)
			schemaText(props[name], parts, depth+1)
		}
	}
	schemaText(obj["items"], parts, depth+1)
	for _, key := range []string{"anyOf", "oneOf", "allOf"} {
		if variants, ok := obj[key].([]any); ok {
			for _, v := range variants {
				schemaText(v, parts, depth+1)
			}
		}
	}
}

// isSearchStopWord tells the English stop words pi's search leaves out.
func isSearchStopWord(word string) bool {
	switch word {
	case "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it",
		"of", "on", "or", "that", "the", "this", "to", "with":
		return true
	}
	return false
}

// searchTerms splits text into words as pi's search does: camelCase and
// acronyms apart, lower case, letters and digits only, English stop words
// out, a naive singular of each plain word.
func searchTerms(text string) []string {
	var b strings.Builder
	runes := []rune(text)
	for i, r := range runes {
		if i > 0 && isASCIIUpper(r) { // camelCase and HTMLParser apart, as pi's (ASCII) rules split them
			prev := runes[i-1]
			nextLower := i+1 < len(runes) && runes[i+1] >= 'a' && runes[i+1] <= 'z'
			if prev >= 'a' && prev <= 'z' || prev >= '0' && prev <= '9' || isASCIIUpper(prev) && nextLower {
				b.WriteByte(' ')
			}
		}
		switch {
		case unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.M, r):
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteByte(' ')
		}
	}
	var terms []string
	for _, word := range strings.Fields(b.String()) {
		if isSearchStopWord(word) {
			continue
		}
		terms = append(terms, stemWord(word))
	}
	return terms
}

func isASCIIUpper(r rune) bool { return r >= 'A' && r <= 'Z' }

// stemWord is pi's naive singular of a plain ASCII word: issues → issue,
// searches → search.
func stemWord(w string) string {
	for _, r := range w {
		if r > 'z' || (r < 'a' && (r < '0' || r > '9')) {
			return w
		}
	}
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && (strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "sses") ||
		strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "zes")):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		return w[:len(w)-1]
	}
	return w
}

// rankTools is pi's BM25 ranking: a tool that matches more of the
// query's terms ranks first, then by score (a term in the name counts 3
// times its IDF, in the server's text 0.5 times, in the description as
// BM25 with k1 1.2 and b 0.75; a tool whose whole last name part is in
// the query gets a bonus); a query that is a tool's name puts it first.
// Ties keep the documents' order.
func rankTools(query string, docs []searchDoc, limit int) []string {
	var queryTerms []string
	for _, term := range searchTerms(query) {
		if !slices.Contains(queryTerms, term) {
			queryTerms = append(queryTerms, term)
		}
	}
	if len(queryTerms) == 0 || len(docs) == 0 || limit <= 0 {
		return nil
	}
	const k1, b, nameWeight, namespaceWeight = 1.2, 0.75, 3.0, 0.5
	total := 0
	for _, d := range docs {
		total += d.textLength
	}
	average := float64(total) / float64(len(docs))
	if average == 0 {
		average = 1
	}
	idf := map[string]float64{}
	bonus := 0.0
	for _, term := range queryTerms {
		n := 0
		for _, d := range docs {
			if d.nameTerms[term] || d.textCounts[term] > 0 || d.namespaceTerms[term] {
				n++
			}
		}
		idf[term] = math.Log(1 + (float64(len(docs)-n)+0.5)/(float64(n)+0.5))
		bonus += idf[term]
	}
	exact := searchName(query)
	type match struct {
		name    string
		score   float64
		covered int
		exact   bool
	}
	var matches []match
	for _, d := range docs {
		norm := k1 * (1 - b + b*float64(d.textLength)/average)
		score, covered := 0.0, 0
		for _, term := range queryTerms {
			count := float64(d.textCounts[term])
			weight := count * (k1 + 1) / (count + norm)
			if d.nameTerms[term] {
				weight += nameWeight
			}
			if d.namespaceTerms[term] {
				weight += namespaceWeight
			}
			if weight > 0 {
				covered++
			}
			score += idf[term] * weight
		}
		if score == 0 {
			continue
		}
		if len(d.localNameTerms) > 0 && !slices.ContainsFunc(d.localNameTerms, func(t string) bool { return !slices.Contains(queryTerms, t) }) {
			score += bonus
		}
		name := searchName(d.name)
		matches = append(matches, match{d.name, score, covered, name == exact || strings.HasSuffix(name, "__"+exact)})
	}
	slices.SortStableFunc(matches, func(x, y match) int {
		switch {
		case x.exact != y.exact:
			if x.exact {
				return -1
			}
			return 1
		case x.covered != y.covered:
			return y.covered - x.covered
		case x.score > y.score:
			return -1
		case x.score < y.score:
			return 1
		}
		return 0
	})
	var names []string
	for _, m := range matches[:min(limit, len(matches))] {
		names = append(names, m.name)
	}
	return names
}

// searchName is a name as a query may spell it: lower case, anything
// but letters, digits, _ and $ as _.
func searchName(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(name)) {
		if r < 128 && (r == '_' || r == '$' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
