package main

// settings.json's images.blockImages (pi 1.6's): the model is sent the
// text "Image reading is disabled." in the place of every image, while the
// conversation and the session keep them (testdata/images_blocked.txtar
// shows a prompt's and read's images going to a model).

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestImagesBlocked: with blockImages, no API is sent an image — of a
// prompt, a tool result, a custom message —, each gets the text in its
// place (one for two side by side), and the conversation keeps them.
func TestImagesBlocked(t *testing.T) {
	img := contentBlock{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nblocked"))}
	history := func() []any {
		return []any{
			&userMessage{Role: "user", Content: []contentBlock{{Type: "text", Text: "Look"}, img, img}},
			&assistantMessage{Role: "assistant", API: apiOpenAI, Provider: "p", Model: "m", StopReason: "toolUse", Content: []contentBlock{
				{Type: "toolCall", ID: "call_1", Name: "read", Arguments: json.RawMessage(`{"path":"a.png"}`)}}},
			&toolResultMessage{Role: "toolResult", ToolCallID: "call_1", ToolName: "read", Content: []contentBlock{{Type: "text", Text: "Read image file [image/png]"}, img}},
			rawMessage(`{"role":"custom","customType":"x","content":[{"type":"image","data":"` + img.Data + `","mimeType":"image/png"}],"display":true}`),
		}
	}
	for _, api := range []string{apiOpenAI, apiResponses, apiAnthropic, apiGoogle} {
		m := &model{ID: "m", API: api, Provider: "p", imageable: true, MaxTokens: 1000}
		if body := sentRequest(t, m, streamRequest{messages: history(), thinking: "off"}); !strings.Contains(body, img.Data) {
			t.Fatalf("%s: without blockImages the image is not sent:\n%.2000s", api, body)
		}
		h := history()
		body := sentRequest(t, m, streamRequest{messages: h, thinking: "off", blockImages: true})
		if strings.Contains(body, img.Data) || strings.Contains(body, "Attached image") || strings.Contains(body, "see attached image") {
			t.Errorf("%s: an image was sent:\n%.2000s", api, body)
		}
		if n := strings.Count(body, imagesBlocked); n != 3 {
			t.Errorf("%s: %d times %q, want 3 (the prompt's two as one, the result's, the custom message's):\n%.2000s", api, n, imagesBlocked, body)
		}
		if !reflect.DeepEqual(h, history()) {
			t.Errorf("%s: the conversation lost its images", api)
		}
	}
}

// TestBlockedImagesContent: each image is the text; of such texts side by
// side one is kept (a user's own of the same words too, as pi); content
// without an image is kept as it is.
func TestBlockedImagesContent(t *testing.T) {
	img := contentBlock{Type: "image", MimeType: "image/png", Data: "AAAA"}
	text := func(s string) contentBlock { return contentBlock{Type: "text", Text: s} }
	blocked := text(imagesBlocked)
	for _, tt := range []struct {
		name    string
		in, out []contentBlock
	}{
		{"none", []contentBlock{text("a"), blocked, blocked}, nil},
		{"one", []contentBlock{text("a"), img, text("b")}, []contentBlock{text("a"), blocked, text("b")}},
		{"first", []contentBlock{img}, []contentBlock{blocked}},
		{"side by side", []contentBlock{img, img, img, text("b"), img}, []contentBlock{blocked, text("b"), blocked}},
		{"after the same text", []contentBlock{blocked, img, text("b"), blocked}, []contentBlock{blocked, text("b"), blocked}},
	} {
		out, ok := blockedImages(tt.in)
		if ok != (tt.out != nil) || !reflect.DeepEqual(out, tt.out) {
			t.Errorf("%s: %v, %v; want %v", tt.name, out, ok, tt.out)
		}
	}
}

// TestBlockImagesSetting: images.blockImages is read from the user's
// settings.json and then the project's, the project's over the user's.
func TestBlockImagesSetting(t *testing.T) {
	for _, tt := range []struct {
		user, project string
		want          bool
	}{
		{`{}`, `{}`, false},
		{`{"images":{"blockImages":true}}`, `{}`, true},
		{`{"images":{"blockImages":true}}`, `{"images":{"autoResize":false}}`, true},
		{`{"images":{"blockImages":true}}`, `{"images":{"blockImages":false}}`, false},
		{`{}`, `{"images":{"blockImages":true}}`, true},
	} {
		dir := t.TempDir()
		user, project := filepath.Join(dir, "user.json"), filepath.Join(dir, "project.json")
		os.WriteFile(user, []byte(tt.user), 0o644)
		os.WriteFile(project, []byte(tt.project), 0o644)
		set := &settings{hostSettings: &hostSettings{}}
		set.applySettingsFile(user)
		set.applySettingsFile(project)
		if set.blockImages != tt.want || len(set.notices) > 0 {
			t.Errorf("%s then %s: blockImages %v (notices %q), want %v", tt.user, tt.project, set.blockImages, set.notices, tt.want)
		}
	}
}
