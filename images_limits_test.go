package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestImageLimitsOfTheModel: a model's resize profile in models.json
// (inputLimits.images.resize) is what images are made to fit as they
// enter the conversation with it in use: a prompt's image of 400x300 and
// one the read tool gives are sent at 100x75, as JPEG of the profile's
// quality, each with pi's note of the two sizes.
func TestImageLimitsOfTheModel(t *testing.T) {
	e, cwd := newTestEnv(t), t.TempDir()
	fm := startFakeModel(t, apiOpenAI, `{"toolCalls":[{"id":"c1","name":"read","args":["{\"path\":\"photo.png\"}"]}]}
{"text":["done"]}`, e.agentDir)
	models := fmt.Sprintf(`{"providers":{"fake":{"baseUrl":%q,"api":"openai-completions","models":[{"id":"fake-model","input":["text","image"],`+
		`"inputLimits":{"maxRequestBytes":1000000,"images":{"maxPerMessage":3,"maxPerRequest":9,"resize":{"maxWidth":100,"maxHeight":100,"jpegQuality":50}}}}]}}}`,
		fm.server.URL+"/v1")
	os.WriteFile(filepath.Join(e.agentDir, "models.json"), []byte(models), 0o644)
	photo := noiseImage(400, 300)
	var file bytes.Buffer
	png.Encode(&file, photo)
	os.WriteFile(filepath.Join(cwd, "photo.png"), file.Bytes(), 0o644)

	ps := startSessionIn(t, e, []string{"rpc", "--cwd", cwd, "--no-session"})
	ps.send(`{"id":"p","type":"prompt","message":"Look","images":[{"type":"image","mimeType":"image/png","data":"` + pngBlock(t, photo).Data + `"}]}`)
	ps.waitFor(`"type":"agent_settled"`)
	ps.close()
	if out := string(ps.out.bytes()); strings.Contains(out, "warning") {
		t.Errorf("a warning:\n%s", out)
	}
	body, _ := json.Marshal(fm.lastRequest())
	text := string(body)
	const note = "[Image: original 400x300, displayed at 100x75. Multiply coordinates by 4.00 to map to original image.]"
	if n := strings.Count(text, note); n != 2 {
		t.Errorf("the note %d times in the request, want 2 (the prompt's, read's):\n%.2000s", n, text)
	}
	var want bytes.Buffer
	jpeg.Encode(&want, scaleImage(photo, 100, 75), &jpeg.Options{Quality: 50})
	sent := regexp.MustCompile(`data:(image/[a-z]+);base64,([A-Za-z0-9+/=]+)`).FindAllStringSubmatch(text, -1)
	if len(sent) != 2 {
		t.Fatalf("%d images sent, want 2:\n%.2000s", len(sent), text)
	}
	for _, img := range sent {
		raw, err := base64.StdEncoding.DecodeString(img[2])
		if err != nil {
			t.Fatal(err)
		}
		cfg, format, err := image.DecodeConfig(bytes.NewReader(raw))
		if err != nil || format != "jpeg" || cfg.Width != 100 || cfg.Height != 75 {
			t.Errorf("sent a %s image of %dx%d (%v), want a JPEG of 100x75", format, cfg.Width, cfg.Height, err)
		}
		if !bytes.Equal(raw, want.Bytes()) {
			t.Errorf("sent a JPEG of %d bytes, not the one of quality 50 (%d bytes)", len(raw), want.Len())
		}
	}
}

// TestImageLimitsFit: fitImage keeps to a profile's width, height, base64
// and JPEG quality, and to the default's for the fields it does not give.
func TestImageLimitsFit(t *testing.T) {
	photo := noiseImage(400, 300)
	in := pngBlock(t, photo)
	if out, _, fit := fitImage(in, imageLimits{}); fit != imageKept || out.Data != in.Data {
		t.Errorf("no profile: %v, want the image kept (the default's 2000 px, 4.5 MiB)", fit)
	}
	out, hint, fit := fitImage(in, imageLimits{maxHeight: 150})
	if fit != imageScaled || !strings.Contains(hint, "displayed at 200x150.") {
		t.Errorf("maxHeight 150: %v, %q", fit, hint)
	}
	var want bytes.Buffer
	jpeg.Encode(&want, scaleImage(photo, 200, 150), &jpeg.Options{Quality: 80})
	if out.Data != base64.StdEncoding.EncodeToString(want.Bytes()) {
		t.Error("maxHeight 150: not JPEG of the default quality, 80")
	}
	out, hint, fit = fitImage(in, imageLimits{maxBytes: 4000})
	if fit != imageScaled || len(out.Data) >= 4000 || !strings.Contains(hint, "original 400x300") {
		t.Errorf("maxBytes 4000: %v, %d bytes of base64, %q", fit, len(out.Data), hint)
	}
	if w, h, _ := imageSize(out.Data); w >= 400 || h >= 300 {
		t.Errorf("maxBytes 4000: %dx%d, want smaller than 400x300", w, h)
	}
	if out, _, fit := fitImage(in, imageLimits{maxBytes: 1}); fit != imageBroken || out.Data != in.Data {
		t.Errorf("maxBytes 1: %v, want it broken (nothing fits)", fit)
	}
}

// TestImageLimitsInModelsJSON: inputLimits in models.json, of a model it
// lists and in modelOverrides (merged field by field over the model's, as
// pi merges them); a value rpi cannot use is a warning naming it and
// what holds instead: the default, or in an override the model's own
// value where it has one (the warning said the default there too), a
// side above 2000 is 2000, and a value not an integer makes the file
// invalid, as any other of the wrong type.
func TestImageLimitsInModelsJSON(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "models.json"), []byte(`{"providers":{`+
		`"groq":{"modelOverrides":{"llama-3.3-70b-versatile":{"inputLimits":{"images":{"resize":{"maxWidth":300}}}},`+
		`"llama-3.1-8b-instant":{"inputLimits":{"images":{"resize":{"jpegQuality":0}}}}}},`+
		`"local":{"baseUrl":"http://127.0.0.1:9/v1","api":"openai-completions","models":[`+
		`{"id":"a","inputLimits":{"images":{"resize":{"maxWidth":0,"maxHeight":5000,"maxBytes":-1,"jpegQuality":101}}}},`+
		`{"id":"b","inputLimits":{"images":{"resize":{"maxWidth":500,"maxHeight":400,"jpegQuality":60}}}},{"id":"c"}],`+
		`"modelOverrides":{"a":{"inputLimits":{"images":{"resize":{"maxHeight":0,"maxBytes":-5}}}},`+
		`"b":{"inputLimits":{"maxRequestBytes":10,"images":{"resize":{"maxWidth":0,"maxHeight":200}}}}}}}}`), 0o600)
	env := map[string]string{"GROQ_API_KEY": "gsk_abcdefgh"}
	setup, err := loadModels(dir, "", "", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	path := dir + "/models.json"
	wantWarnings := []string{
		path + `: provider groq: modelOverrides llama-3.1-8b-instant: ignored "inputLimits.images.resize.jpegQuality": 0 is not 1 to 100; the default is 80`,
		path + `: provider local: modelOverrides a: ignored "inputLimits.images.resize.maxHeight": 0 is not above 0; the model's own is 2000`,
		path + `: provider local: modelOverrides a: ignored "inputLimits.images.resize.maxBytes": -5 is not above 0; the default is 4718592`,
		path + `: provider local: modelOverrides b: ignored "inputLimits.images.resize.maxWidth": 0 is not above 0; the model's own is 500`,
		path + `: provider local: model a: ignored "inputLimits.images.resize.maxWidth": 0 is not above 0; the default is 2000`,
		path + `: provider local: model a: "inputLimits.images.resize.maxHeight": 5000 is above 2000, the most rpi scales an image to; 2000 used`,
		path + `: provider local: model a: ignored "inputLimits.images.resize.maxBytes": -1 is not above 0; the default is 4718592`,
		path + `: provider local: model a: ignored "inputLimits.images.resize.jpegQuality": 101 is not 1 to 100; the default is 80`,
	}
	if !slices.Equal(setup.warnings, wantWarnings) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(setup.warnings, "\n"), strings.Join(wantWarnings, "\n"))
	}
	got := map[string]imageLimits{}
	for _, p := range []string{"local", "groq"} {
		for _, m := range setup.catalog.of(p) {
			got[m.ID] = m.imageLimits()
		}
	}
	d := defaultImageLimits
	for id, want := range map[string]imageLimits{
		"a":                       d,
		"b":                       {500, 200, d.maxBytes, 60},
		"c":                       d,
		"llama-3.3-70b-versatile": {300, 2000, d.maxBytes, 80},
		"llama-3.1-8b-instant":    d,
	} {
		if got[id] != want {
			t.Errorf("%s: %+v, want %+v", id, got[id], want)
		}
	}
	if (*model)(nil).imageLimits() != d {
		t.Error("no model: not the default")
	}
	for _, bad := range []string{`{"maxWidth":"100"}`, `{"maxWidth":1.5}`, `[]`} {
		os.WriteFile(filepath.Join(dir, "models.json"), []byte(`{"providers":{"local":{"baseUrl":"http://127.0.0.1:9/v1",`+
			`"api":"openai-completions","models":[{"id":"a","inputLimits":{"images":{"resize":`+bad+`}}}]}}}`), 0o600)
		if _, err := loadModels(dir, "", "", func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "Invalid "+path) {
			t.Errorf("resize %s: %v, want the file invalid", bad, err)
		}
	}
}
