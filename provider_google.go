package main

// Google Gemini (google-generative-ai): the request body, with thinking
// as a level or a token budget by model, and the reader of its stream.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// googleGemini is the Gemini API (streamGenerateContent).
var googleGemini = &wireAPI{
	name: apiGoogle,
	url: func(m *model) string {
		return m.BaseURL + "/models/" + url.PathEscape(strings.TrimPrefix(m.ID, "models/")) + ":streamGenerateContent?alt=sse"
	},
	auth: func(h http.Header, key string) {
		if key != "" {
			h.Set("x-goog-api-key", key)
		}
	},
	body:      func(req streamRequest) any { return geminiBody(req) },
	maxTokens: answerTokens,
	read:      readGemini,
}

// geminiLevelModel matches the Gemini models whose thinking is set by a
// level rather than a token budget (pi's rule: Gemini 3 pro and flash,
// Gemini 4 and later, the -latest flash aliases, Gemma 4); compiled at
// first use.
var geminiLevelModel = lazy[*regexp.Regexp]{build: func() *regexp.Regexp {
	return regexp.MustCompile(`^(gemini-3(\.\d+)?-(pro|flash)|gemini-([4-9]|[1-9]\d)|gemini-flash(-lite)?-latest|gemma-?4)`)
}}

// geminiVersion is the major version in a Gemini model id (0 if none).
func geminiVersion(id string) int {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(id, "models/"), "gemini-")
	if !ok {
		return 0
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	n, _ := strconv.Atoi(rest[:end])
	return n
}

// geminiBudget is the thinking budget of a Gemini 2.5 model per level
// (pi's table; xhigh and max get high's); -1 lets the model decide.
func geminiBudget(id, level string) int {
	i := map[string]int{"minimal": 0, "low": 1, "medium": 2}[level]
	if level == "high" || level == "xhigh" || level == "max" {
		i = 3
	}
	switch {
	case strings.Contains(id, "2.5-pro"):
		return [4]int{128, 2048, 8192, 32768}[i]
	case strings.Contains(id, "2.5-flash-lite"):
		return [4]int{512, 2048, 8192, 24576}[i]
	case strings.Contains(id, "2.5-flash"):
		return [4]int{128, 2048, 8192, 24576}[i]
	}
	return -1
}

// geminiThinking is generationConfig.thinkingConfig for the thinking level
// set: a level (Gemini 3 and later) or a budget, with the thoughts
// included unless thinking is off. Off is a budget of 0, or the lowest
// level for a model that cannot stop thinking.
func geminiThinking(m *model, thinking string, budgets thinkingBudgets) map[string]any {
	id := strings.TrimPrefix(m.ID, "models/")
	level, value := m.wireLevel(thinking)
	config := map[string]any{}
	if geminiLevelModel.get().MatchString(id) {
		if level == "off" {
			_, value = m.wireLevel("minimal")
		}
		config["thinkingLevel"] = strings.ToUpper(value)
	} else if level == "off" {
		config["thinkingBudget"] = 0
	} else {
		budget, ok := budgets.custom(level)
		if !ok {
			budget = geminiBudget(id, level)
		}
		config["thinkingBudget"] = budget
	}
	if thinking != "off" {
		config["includeThoughts"] = true
	}
	return config
}

// validSignature reports whether a thought signature is standard base64,
// the only form Gemini takes back.
func validSignature(sig string) bool {
	if sig == "" || len(sig)%4 != 0 {
		return false
	}
	_, err := base64.StdEncoding.DecodeString(sig)
	return err == nil
}

// geminiBody is a streamGenerateContent request as pi sends it: user and
// model contents (consecutive tool results in one), thoughts and thought
// signatures only back to the model that made them (Gemini 3 and later
// get Google's skip value for a call without one), function call ids
// only to Gemini 3 and later, the tools as parametersJsonSchema.
func geminiBody(req streamRequest) map[string]any {
	m := req.model
	withIDs := geminiVersion(m.ID) >= 3
	var contents []map[string]any
	toolResults := false // the last content holds tool results
	add := func(role string, parts []map[string]any, results bool) {
		if len(parts) == 0 {
			return
		}
		if n := len(contents); results && toolResults && n > 0 {
			contents[n-1]["parts"] = append(contents[n-1]["parts"].([]map[string]any), parts...)
			return
		}
		contents = append(contents, map[string]any{"role": role, "parts": parts})
		toolResults = results
	}
	image := func(b contentBlock) map[string]any {
		if note := imageNote(m, b); note != "" {
			return map[string]any{"text": note}
		}
		return map[string]any{"inlineData": map[string]string{"mimeType": b.MimeType, "data": b.Data}}
	}
	// The images of a run of tool results go in a user content after it
	// (before Gemini 3, whose function responses hold them).
	var toolImages []map[string]any
	flushImages := func() {
		if len(toolImages) > 0 {
			add("user", append([]map[string]any{{"text": toolImagesText}}, toolImages...), false)
			toolImages = nil
		}
	}
	ids := wireCallIDs()
	for _, msg := range req.context() {
		if _, result := msg.(*toolResultMessage); !result {
			flushImages()
		}
		switch msg := msg.(type) {
		case *userMessage:
			var parts []map[string]any
			for _, b := range msg.Content {
				if b.Type == "text" && b.Text != "" {
					parts = append(parts, map[string]any{"text": b.Text})
				} else if b.Type == "image" {
					parts = append(parts, image(b))
				}
			}
			add("user", parts, false)
		case *assistantMessage:
			same := sameModel(msg, m)
			signed := func(part map[string]any, sig string) map[string]any {
				if same && validSignature(sig) {
					part["thoughtSignature"] = sig
				}
				return part
			}
			var parts []map[string]any
			for _, b := range msg.Content {
				switch b.Type {
				// A blank thought or text goes only with a signature, which
				// Gemini may put on a part with no text and wants back.
				case "thinking":
					if same && !b.Redacted && (strings.TrimSpace(b.Thinking) != "" || validSignature(b.Signature)) {
						parts = append(parts, signed(map[string]any{"thought": true, "text": b.Thinking}, b.Signature))
					}
				case "text":
					if strings.TrimSpace(b.Text) != "" || same && validSignature(b.Signature) {
						parts = append(parts, signed(map[string]any{"text": b.Text}, b.Signature))
					}
				case "toolCall":
					call := map[string]any{"name": b.Name, "args": json.RawMessage(callArguments(b))}
					if withIDs {
						call["id"] = ids.call(b.ID)
					}
					part := signed(map[string]any{"functionCall": call}, b.Signature)
					if _, ok := part["thoughtSignature"]; !ok && withIDs {
						// Gemini 3 refuses a call of the turn without a signature
						// (another model's, or one it did not sign): Google's
						// value for such history, as pi sends it.
						part["thoughtSignature"] = "skip_thought_signature_validator"
					}
					parts = append(parts, part)
				}
			}
			add("model", parts, false)
		case *toolResultMessage:
			response := map[string]string{"output": toolResultText(m, msg.Content)}
			if msg.IsError {
				response = map[string]string{"error": toolResultText(m, msg.Content)}
			}
			result := map[string]any{"name": msg.ToolName, "response": response}
			var images []map[string]any
			for _, b := range toolResultImages(m, msg.Content) {
				images = append(images, image(b))
			}
			if withIDs {
				result["id"] = ids.result(msg.ToolCallID)
				if images != nil { // Gemini 3 takes them in the response itself
					result["parts"] = images
				}
			} else {
				toolImages = append(toolImages, images...)
			}
			add("user", []map[string]any{{"functionResponse": result}}, true)
		}
	}
	flushImages()
	body := map[string]any{"contents": contents}
	if req.system != "" {
		body["systemInstruction"] = map[string]any{"parts": []map[string]string{{"text": req.system}}}
	}
	if len(req.tools) > 0 {
		// Gemini 3 and later hold strict tools' calls to their schema in
		// the VALIDATED mode, as pi asks for it.
		var decls []map[string]any
		validated := false
		for _, t := range req.tools {
			params := t.schema
			if strict, ok := t.strictFor(false); ok && geminiVersion(m.ID) >= 3 {
				params, validated = strict, true
			}
			decls = append(decls, map[string]any{"name": t.name, "description": t.description, "parametersJsonSchema": params})
		}
		body["tools"] = []map[string]any{{"functionDeclarations": decls}}
		if validated {
			body["toolConfig"] = map[string]any{"functionCallingConfig": map[string]string{"mode": "VALIDATED"}}
		}
	}
	config := map[string]any{"maxOutputTokens": answerTokens(req)}
	if m.Reasoning {
		config["thinkingConfig"] = geminiThinking(m, req.thinking, req.budgets)
	}
	body["generationConfig"] = config
	return body
}

// geminiChunk is one event of a Gemini stream: a piece of the answer
// with the usage so far, or an error.
type geminiChunk struct {
	ResponseID string `json:"responseId"`
	Candidates []struct {
		Content struct {
			Parts []struct {
				Text             *string `json:"text"`
				Thought          bool    `json:"thought"`
				ThoughtSignature string  `json:"thoughtSignature"`
				FunctionCall     *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *struct {
		PromptTokenCount        tokenCount `json:"promptTokenCount"`
		CandidatesTokenCount    tokenCount `json:"candidatesTokenCount"`
		CachedContentTokenCount tokenCount `json:"cachedContentTokenCount"`
		ThoughtsTokenCount      tokenCount `json:"thoughtsTokenCount"`
	} `json:"usageMetadata"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

// readGemini reads a Gemini stream: "data:" chunks and no end marker, a
// chunk carrying finishReason (a usage may follow it). Consecutive thought parts make one
// thinking block and text parts one text block; a function call arrives
// whole. A call without an id (or with one already used) gets one made
// up as pi does: "<name>_<ms>_<n>".
func readGemini(body io.Reader, st *streamer, m *model) error {
	current := -1 // the open text or thinking block
	closeCurrent := func() {
		if current >= 0 {
			st.endBlock(current)
			current = -1
		}
	}
	finish, blocked := "", ""
	ids := map[string]bool{}
	err := st.events(body, func(_ string, data []byte) (bool, error) {
		var chunk geminiChunk
		if err := json.Unmarshal(data, &chunk); err != nil {
			if finish != "" {
				return true, nil // after the finish, a proxy's end marker ([DONE]) ends the answer
			}
			return true, &providerError{message: fmt.Sprintf("Invalid response from the model server: %v", err)}
		}
		if e := chunk.Error; e != nil {
			return true, &providerError{message: fmt.Sprintf("%d %s: %s", e.Code, e.Status, e.Message)}
		}
		st.responded(chunk.ResponseID, "", m.ID)
		if u := chunk.UsageMetadata; u != nil {
			cached := int(u.CachedContentTokenCount)
			st.msg.Usage.Input, st.msg.Usage.CacheRead = subTokens(int(u.PromptTokenCount), cached), cached
			st.msg.Usage.Output = addTokens(int(u.CandidatesTokenCount), int(u.ThoughtsTokenCount))
		}
		if f := chunk.PromptFeedback; f != nil && f.BlockReason != "" {
			blocked = f.BlockReason
		}
		// The answer is the first candidate, as pi 1.6 reads it: another
		// one's parts are not joined to it.
		for _, c := range chunk.Candidates[:min(len(chunk.Candidates), 1)] {
			for _, p := range c.Content.Parts {
				if call := p.FunctionCall; call != nil {
					closeCurrent()
					id := call.ID
					if id == "" || ids[id] {
						id = fmt.Sprintf("%s_%d_%d", call.Name, time.Now().UnixMilli(), len(ids)+1)
					}
					ids[id] = true
					i := st.startBlock(len(st.msg.Content), contentBlock{Type: "toolCall", ID: id, Name: call.Name, Signature: p.ThoughtSignature})
					// The args are raw JSON, as the server sent it: a byte in a
					// string that is not UTF-8 becomes U+FFFD, as encoding/json
					// decodes the strings of every other reader.
					args := string(appendValidUTF8(nil, call.Args))
					if args == "" || args == "null" {
						args = "{}"
					}
					st.delta(i, args)
					st.endBlock(i)
					continue
				}
				if p.Text == nil {
					continue
				}
				kind := "text"
				if p.Thought {
					kind = "thinking"
				}
				if current >= 0 && st.msg.Content[current].Type != kind {
					closeCurrent()
				}
				if current < 0 {
					if *p.Text == "" && p.ThoughtSignature == "" {
						continue // the empty part that ends a stream
					}
					current = st.startBlock(len(st.msg.Content), contentBlock{Type: kind})
				}
				if *p.Text != "" {
					st.delta(current, *p.Text)
				}
				if sig := p.ThoughtSignature; sig != "" && current >= 0 {
					st.keep(&st.msg.Content[current].Signature, sig) // the thinking's or the text's
				}
			}
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
		// The stream is read to its end, as pi 1.6 reads it: a usage may
		// come in a chunk after the finish.
		st.finished = finish != ""
		return false, nil
	})
	closeCurrent()
	if err != nil {
		if blocked != "" {
			return &providerError{message: "The prompt was blocked: " + blocked}
		}
		return err
	}
	stop := map[string]string{"STOP": "stop", "MAX_TOKENS": "length", "CONTINUATION": "length"}
	return st.stopAs(stop[finish], finish, "Provider stopped with: "+finish, m) // pi 1.6's words
}
