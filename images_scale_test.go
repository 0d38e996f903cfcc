package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// noiseImage is a w×h image of random colours, which PNG cannot make
// small (JPEG can).
func noiseImage(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(1, 2))
	for i := range img.Pix {
		img.Pix[i] = byte(r.Uint32())
	}
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 0xff
	}
	return img
}

// flatImage is a w×h image of one colour, which PNG makes smaller than JPEG.
func flatImage(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = []byte{0x20, 0x80, 0xc0, 0xff}[i%4]
	}
	return img
}

func pngBlock(t testing.TB, img image.Image) contentBlock {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return contentBlock{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(b.Bytes())}
}

func jpegBlock(t testing.TB, img image.Image) contentBlock {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	return contentBlock{Type: "image", MimeType: "image/jpeg", Data: base64.StdEncoding.EncodeToString(b.Bytes())}
}

// checkScaled fails unless out is a w×h image of type mime, its bytes of
// that type and decoding to that size, under the base64 limit.
func checkScaled(t *testing.T, out contentBlock, mime string, w, h int) {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(out.Data)
	if err != nil {
		t.Fatal(err)
	}
	img, format, err := image.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the scaled image does not decode: %v", err)
	}
	if out.Type != "image" || out.MimeType != mime || imageType(raw) != mime || "image/"+format != mime {
		t.Errorf("scaled to %s (%s, bytes of %s), want %s", out.MimeType, format, imageType(raw), mime)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("scaled to %dx%d, want %dx%d", b.Dx(), b.Dy(), w, h)
	}
	if len(out.Data) >= defaultImageLimits.maxBytes {
		t.Errorf("scaled to %d bytes of base64, want less than %d", len(out.Data), defaultImageLimits.maxBytes)
	}
}

// TestFitImageScales: an image of more than 2000 px a side, or of 4.5 MiB
// of base64 or more, is scaled to at most 2000 px a side and encoded
// again as the smaller of PNG and JPEG (JPEG for a photo-like PNG, PNG for
// a flat JPEG), with pi's note of the two sizes; the ratio is written as
// JavaScript's toFixed(2) writes it (1.125 as 1.13).
func TestFitImageScales(t *testing.T) {
	for _, c := range []struct {
		name     string
		in       contentBlock
		mime     string
		w, h     int
		original string
		ratio    string
	}{
		{"noise PNG", pngBlock(t, noiseImage(3000, 1500)), "image/jpeg", 2000, 1000, "3000x1500", "1.50"},
		{"flat JPEG", jpegBlock(t, flatImage(2250, 900)), "image/png", 2000, 800, "2250x900", "1.13"},
		{"tall flat PNG", pngBlock(t, flatImage(300, 4000)), "image/png", 150, 2000, "300x4000", "2.00"},
		{"noise PNG of 5.9 MiB of base64, 1200 px a side", pngBlock(t, noiseImage(1200, 1200)), "image/jpeg", 1200, 1200, "1200x1200", "1.00"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, hint, fit := fitImage(c.in, imageLimits{})
			if fit != imageScaled {
				t.Fatalf("fit %v, want scaled", fit)
			}
			checkScaled(t, out, c.mime, c.w, c.h)
			want := fmt.Sprintf("[Image: original %s, displayed at %dx%d. Multiply coordinates by %s to map to original image.]",
				c.original, c.w, c.h, c.ratio)
			if hint != want {
				t.Errorf("hint %q, want %q", hint, want)
			}
		})
	}
}

// pngHeader is the first bytes of a PNG w×h, of 8-bit RGBA, whose image
// data is rest.
func pngHeader(w, h uint32, rest string) []byte {
	ihdr := make([]byte, 17)
	copy(ihdr, "IHDR")
	binary.BigEndian.PutUint32(ihdr[4:], w)
	binary.BigEndian.PutUint32(ihdr[8:], h)
	copy(ihdr[12:], []byte{8, 6, 0, 0, 0})
	b := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0d")
	b = append(b, ihdr...)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(ihdr))
	return append(b, rest...)
}

// TestFitImageKeeps: an image within the limits goes as it is (not
// decoded: its bytes are not even looked at past the header), and so does
// one rpi cannot decode: WebP, one whose header says more pixels than
// rpi decodes (a PNG of 100000x100000, which must not make rpi allocate
// what it says), and bytes of no image it knows.
func TestFitImageKeeps(t *testing.T) {
	small := pngBlock(t, flatImage(2000, 2000))
	webp := contentBlock{Type: "image", MimeType: "image/webp",
		Data: base64.StdEncoding.EncodeToString([]byte("RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00\xff\x0f\x00\xff\x0f\x00"))}
	giant := contentBlock{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(pngHeader(100000, 100000, "IDAT"))}
	unknown := contentBlock{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString([]byte("not an image at all"))}
	webpSaidPNG := webp
	webpSaidPNG.MimeType = "image/png"
	for name, in := range map[string]contentBlock{"2000x2000": small, "WebP 4096x4096": webp, "WebP said to be a PNG": webpSaidPNG, "PNG 100000x100000": giant, "unknown": unknown} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		out, hint, fit := fitImage(in, imageLimits{})
		runtime.ReadMemStats(&after)
		if fit != imageKept || !reflect.DeepEqual(out, in) || hint != "" {
			t.Errorf("%s: fit %v, hint %q, changed %v; want it kept as it is", name, fit, hint, !reflect.DeepEqual(out, in))
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s: %d bytes allocated to judge it", name, n)
		}
	}
}

// TestFitImageBroken: a PNG, JPEG or GIF past a limit whose data does not
// decode is broken (the read tool and a prompt leave it out, with pi's
// note); one within the limits is not decoded, and goes.
func TestFitImageBroken(t *testing.T) {
	for name, data := range map[string][]byte{
		"PNG 3000x10": pngHeader(3000, 10, "\x00\x00\x00\x04IDATjunk"),
		"JPEG 1x2001": []byte("\xff\xd8\xff\xc0\x00\x11\x08\x07\xd1\x00\x01\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01\xff\xda\x00\x08junkjunk"),
		"GIF 2001x1":  []byte("GIF89a\xd1\x07\x01\x00\x00\x00\x00,"),
		"bad base64":  nil,
	} {
		in := contentBlock{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(data)}
		if data == nil {
			in.Data = base64.StdEncoding.EncodeToString(pngHeader(3000, 10, "")) + "!!!!"
		}
		if w, h, ok := imageSize(in.Data); !ok || max(w, h) <= maxImageSide {
			t.Fatalf("%s: the test's header reads as %dx%d, %v", name, w, h, ok)
		}
		if out, _, fit := fitImage(in, imageLimits{}); fit != imageBroken || !reflect.DeepEqual(out, in) {
			t.Errorf("%s: fit %v, want broken", name, fit)
		}
	}
	corrupt := contentBlock{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(pngHeader(20, 20, "junk"))}
	if out, _, fit := fitImage(corrupt, imageLimits{}); fit != imageKept || !reflect.DeepEqual(out, corrupt) {
		t.Errorf("a small corrupt PNG: fit %v, want kept (not decoded)", fit)
	}
}

// TestScaleImageAverages: each pixel of the scaled image is the mean of
// the source pixels that fall on it, alpha-weighted.
func TestScaleImageAverages(t *testing.T) {
	src := image.NewNRGBA(image.Rect(0, 0, 4, 2))
	for x := range 4 {
		for y := range 2 {
			c := color.NRGBA{0xff, 0, 0, 0xff} // left half red
			if x >= 2 {
				c = color.NRGBA{0, 0, uint8(0xff * ((x + y) % 2)), 0xff} // right half black and blue
			}
			src.SetNRGBA(x, y, c)
		}
	}
	dst := scaleImage(src, 2, 1)
	if got, want := dst.RGBAAt(0, 0), (color.RGBA{0xff, 0, 0, 0xff}); got != want {
		t.Errorf("left: %v, want %v", got, want)
	}
	if got, want := dst.RGBAAt(1, 0), (color.RGBA{0, 0, 0x80, 0xff}); got != want {
		t.Errorf("right: %v, want %v", got, want)
	}
	// A transparent pixel adds nothing to the colour: premultiplied.
	half := image.NewNRGBA(image.Rect(0, 0, 2, 1))
	half.SetNRGBA(0, 0, color.NRGBA{0xff, 0xff, 0xff, 0xff})
	half.SetNRGBA(1, 0, color.NRGBA{0, 0xff, 0, 0})
	if got, want := scaleImage(half, 1, 1).RGBAAt(0, 0), (color.RGBA{0x80, 0x80, 0x80, 0x80}); got != want {
		t.Errorf("half transparent: %v, want %v", got, want)
	}
}

// TestFitSides: scaled to at most 2000 px a side, the shape kept and
// rounded as pi rounds; a side never becomes 0 px.
func TestFitSides(t *testing.T) {
	for _, c := range [][4]int{{3000, 1500, 2000, 1000}, {2001, 2001, 2000, 2000}, {1000, 3001, 666, 2000},
		{2250, 900, 2000, 800}, {3000, 1, 2000, 1}, {30000, 2, 2000, 1}, {5, 90000, 1, 2000}, {1999, 2000, 1999, 2000}} {
		if w, h := fitSides(c[0], c[1], defaultImageLimits); w != c[2] || h != c[3] {
			t.Errorf("%dx%d: %dx%d, want %dx%d", c[0], c[1], w, h, c[2], c[3])
		}
	}
}

// TestFixed2: two decimals as JavaScript's toFixed(2) writes them (a tie
// of the exact value rounds up).
func TestFixed2(t *testing.T) {
	for x, want := range map[float64]string{1.125: "1.13", 2.375: "2.38", 1.5: "1.50", 1: "1.00", 3001.0 / 2000: "1.50",
		4000.0 / 3: "1333.33", 1.005: "1.00", 2.0 / 3: "0.67", 0.625: "0.63", 0.875: "0.88"} {
		if got := fixed2(x); got != want {
			t.Errorf("%v: %q, want %q", x, got, want)
		}
	}
}

// FuzzFitImage: whatever bytes an image holds, fitting it never panics;
// an image scaled is one of the types named, of that size, within the
// limits.
func FuzzFitImage(f *testing.F) {
	var small bytes.Buffer
	png.Encode(&small, flatImage(2100, 3))
	var anim bytes.Buffer
	gif.Encode(&anim, flatImage(2001, 2), nil)
	for _, seed := range [][]byte{small.Bytes(), pngHeader(3000, 10, "junk"), pngHeader(1<<31-1, 1<<31-1, ""),
		[]byte("\xff\xd8\xff\xc0\x00\x11\x08\x07\xd1\x00\x01\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01\xff\xda\x00\x08junkjunk"),
		[]byte("GIF89a\xd1\x07\x01\x00\x00\x00\x00,"), anim.Bytes()} {
		f.Add(seed)
	}
	// What TestFitImageMemory and the tests after it found: headers whose
	// decoding takes more than it may, a JPEG turned by its Exif, a GIF
	// frame smaller than its screen, an image of many columns.
	var photo, screen, wide bytes.Buffer
	jpeg.Encode(&photo, flatImage(2100, 16), nil)
	frame := image.NewPaletted(image.Rect(2000, 0, 2010, 10), color.Palette{color.Transparent, color.White})
	gif.EncodeAll(&screen, &gif.GIF{Image: []*image.Paletted{frame}, Delay: []int{0}, Config: image.Config{ColorModel: frame.Palette, Width: 2100, Height: 10}})
	png.Encode(&wide, image.NewGray(image.Rect(0, 0, 1<<20, 1)))
	for _, seed := range [][]byte{pngHeaderOf(5792, 5792, 16, 6, 0, idatStart), pngHeaderOf(3000, 3000, 8, 2, 1, idatStart),
		jpegHeader(5792, 5792, true, []byte{0x11, 0x11, 0x11, 0x11}, 0), jpegHeader(2100, 40, true, []byte{0x22, 0x11, 0x11}, -1),
		jpegHeader(2100, 40, false, []byte{0x11, 0x11, 0x11}, 0), withOrientation(photo.Bytes(), 6), withOrientation(photo.Bytes(), 7),
		screen.Bytes(), wide.Bytes()} {
		f.Add(seed)
	}
	scans := jpegHeader(2100, 40, true, []byte{0x11}, -1)
	for range maxJPEGScans {
		scans = append(scans, scans[len(scans)-10:]...) // its scan again
	}
	f.Add(scans)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := contentBlock{Type: "image", MimeType: imageType(data), Data: base64.StdEncoding.EncodeToString(data)}
		var out contentBlock
		var hint string
		var fit imageFit
		// Decoding within its budget, the result at most 2000x2000 px, its
		// encodings (PNG of 16 MB, JPEGs of less) and their base64.
		if n := allocated(func() { out, hint, fit = fitImage(in, imageLimits{}) }); n > maxDecodeBytes+96<<20 {
			t.Fatalf("%d bytes allocated to fit it (%v)", n, fit)
		}
		if fit != imageScaled {
			if !reflect.DeepEqual(out, in) || hint != "" {
				t.Fatalf("%v, but changed", fit)
			}
			return
		}
		raw, _ := base64.StdEncoding.DecodeString(out.Data)
		w, h, ok := imageSize(out.Data)
		if !ok || w > maxImageSide || h > maxImageSide || len(out.Data) >= defaultImageLimits.maxBytes || imageType(raw) != out.MimeType ||
			!strings.HasPrefix(hint, "[Image: original ") {
			t.Fatalf("scaled to %dx%d (%v) of %s, %d bytes, hint %q", w, h, ok, out.MimeType, len(out.Data), hint)
		}
	})
}

// TestReadScalesImages: read of an image file of more than 2000 px a side
// gives it scaled, pi's note of the two sizes on the line after "Read
// image file [type]" (the type it now is); one past a limit that does
// not decode is pi's note alone, and a small one is as it was.
func TestReadScalesImages(t *testing.T) {
	var wide, small bytes.Buffer
	png.Encode(&wide, noiseImage(2400, 600))
	png.Encode(&small, flatImage(20, 10))
	s := toolServer(t, map[string]string{"wide.png": wide.String(), "bad.png": string(pngHeader(3000, 10, "junk")), "small.png": small.String()})
	res, isError := s.runTool(context.Background(), contentBlock{Type: "toolCall", ID: "c", Name: "read", Arguments: json.RawMessage(`{"path":"wide.png"}`)})
	if isError || len(res.Content) != 2 {
		t.Fatalf("wide.png: %+v", res.Content)
	}
	if want := "Read image file [image/jpeg]\n[Image: original 2400x600, displayed at 2000x500. Multiply coordinates by 1.20 to map to original image.]"; res.Content[0].Text != want {
		t.Errorf("wide.png: %q, want %q", res.Content[0].Text, want)
	}
	checkScaled(t, res.Content[1], "image/jpeg", 2000, 500)
	for name, want := range map[string]string{
		"bad.png":   "Read image file [image/png]\n[Image omitted: could not be resized below the inline image size limit.]",
		"small.png": "Read image file [image/png]|<image image/png>",
	} {
		if got, isError := callTool(t, s, "read", `{"path":"`+name+`"}`); got != want || isError {
			t.Errorf("%s: %q, %v; want %q", name, got, isError, want)
		}
	}
}

// idatStart is the start of a PNG's image data, its zlib header and no
// more: the decoder allocates the image when it has read it.
const idatStart = "\x00\x00\x00\x02IDAT\x78\x9c"

// pngHeaderOf is the first bytes of a PNG w×h of that bit depth, colour
// type and interlace method, whose image data is rest.
func pngHeaderOf(w, h uint32, depth, colour, interlace byte, rest string) []byte {
	b := pngHeader(w, h, "")
	b[24], b[25], b[28] = depth, colour, interlace
	ihdr := b[12:29]
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(ihdr))
	return append(b, rest...)
}

// jpegHeader is the start of a JPEG w×h whose components have the
// sampling factors hv (progressive: SOF2), with an Adobe marker of that
// transform when adobe is not negative, and a scan of every component's
// DC, with no data after it: all the decoder needs to allocate the whole
// image, and for a progressive one the coefficients of each component.
func jpegHeader(w, h int, progressive bool, hv []byte, adobe int) []byte {
	b := []byte("\xff\xd8")
	if adobe >= 0 {
		b = append(b, 0xff, 0xee, 0, 14, 'A', 'd', 'o', 'b', 'e', 0, 100, 0, 0, 0, 0, byte(adobe))
	}
	sof := byte(0xc0)
	if progressive {
		sof = 0xc2
	}
	n := len(hv)
	b = append(b, 0xff, sof, 0, byte(8+3*n), 8, byte(h>>8), byte(h), byte(w>>8), byte(w), byte(n))
	for i, f := range hv {
		b = append(b, byte(i+1), f, 0)
	}
	b = append(b, 0xff, 0xda, 0, byte(6+2*n), byte(n))
	for i := range hv {
		b = append(b, byte(i+1), 0)
	}
	return append(b, 0, 0, 0)
}

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecodeCostBounds: what decoding an image allocates is never more
// than decodeCost says (a little more for the decoder's own state), for
// each kind of image the standard library decodes to a different type,
// whole or cut short after its header (when the decoder has allocated
// the image already).
func TestDecodeCostBounds(t *testing.T) {
	encode := func(img image.Image, enc func(*bytes.Buffer, image.Image) error) []byte {
		var b bytes.Buffer
		if err := enc(&b, img); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	asPNG := func(b *bytes.Buffer, img image.Image) error { return png.Encode(b, img) }
	asJPEG := func(b *bytes.Buffer, img image.Image) error { return jpeg.Encode(b, img, nil) }
	asGIF := func(b *bytes.Buffer, img image.Image) error { return gif.Encode(b, img, nil) }
	half := image.NewNRGBA(image.Rect(0, 0, 600, 400)) // transparent: NRGBA
	wide64 := image.NewNRGBA64(image.Rect(0, 0, 600, 400))
	cases := map[string][]byte{
		"PNG RGBA":                        encode(flatImage(600, 400), asPNG),
		"PNG NRGBA":                       encode(half, asPNG),
		"PNG 16-bit":                      encode(wide64, asPNG),
		"PNG grey":                        encode(image.NewGray(image.Rect(0, 0, 600, 400)), asPNG),
		"PNG paletted":                    encode(image.NewPaletted(image.Rect(0, 0, 600, 400), color.Palette{color.Black, color.White}), asPNG),
		"PNG 16-bit RGBA cut short":       pngHeaderOf(600, 400, 16, 6, 0, idatStart),
		"PNG 16-bit interlaced cut short": pngHeaderOf(600, 400, 16, 6, 1, idatStart),
		"PNG 16-bit wide cut short":       pngHeaderOf(1<<18, 1, 16, 6, 0, idatStart),
		"JPEG 4:2:0":                      encode(noiseImage(600, 400), asJPEG),
		"JPEG grey":                       encode(image.NewGray(image.Rect(0, 0, 600, 400)), asJPEG),
		"JPEG progressive 4:4:4":          jpegHeader(600, 400, true, []byte{0x11, 0x11, 0x11}, -1),
		"JPEG progressive 4:2:0":          jpegHeader(600, 400, true, []byte{0x22, 0x11, 0x11}, -1),
		"JPEG progressive CMYK":           jpegHeader(600, 400, true, []byte{0x11, 0x11, 0x11, 0x11}, 0),
		"JPEG progressive YCCK 2:1":       jpegHeader(600, 400, true, []byte{0x22, 0x11, 0x11, 0x22}, 2),
		"JPEG progressive grey":           jpegHeader(600, 400, true, []byte{0x22}, -1),
		"GIF":                             encode(flatImage(600, 400), asGIF),
	}
	for name, raw := range cases {
		cost, ok := decodeCost(raw)
		if !ok {
			t.Errorf("%s: no cost", name)
			continue
		}
		var err error
		n := allocated(func() { _, _, err = image.Decode(bytes.NewReader(raw)) })
		if n > uint64(cost)+256<<10 {
			t.Errorf("%s: decoding allocated %d bytes (%v), more than its cost %d", name, n, err, cost)
		}
	}
}

// TestFitImageMemory: an image whose header says it would take more than
// maxDecodeBytes to decode goes as it is, without being decoded, however
// few its pixels (under maxScalePixels) and however little data follows:
// a 16-bit PNG and a progressive CMYK JPEG of 5792x5792, each a header
// only, made rpi allocate 256 MiB. One that takes less is scaled.
func TestFitImageMemory(t *testing.T) {
	for name, raw := range map[string][]byte{
		"16-bit PNG":            pngHeaderOf(5792, 5792, 16, 6, 0, idatStart),
		"progressive CMYK JPEG": jpegHeader(5792, 5792, true, []byte{0x11, 0x11, 0x11, 0x11}, 0),
	} {
		in := contentBlock{Type: "image", MimeType: imageType(raw), Data: base64.StdEncoding.EncodeToString(raw)}
		if w, h, ok := imageSize(in.Data); !ok || w*h > maxScalePixels {
			t.Fatalf("%s: the test's header reads as %dx%d, %v", name, w, h, ok)
		}
		var out contentBlock
		var fit imageFit
		if n := allocated(func() { out, _, fit = fitImage(in, imageLimits{}) }); n > 1<<20 {
			t.Errorf("%s: %d bytes allocated to judge it", name, n)
		}
		if fit != imageKept || !reflect.DeepEqual(out, in) {
			t.Errorf("%s: fit %v, want kept", name, fit)
		}
	}
	wide := image.NewNRGBA64(image.Rect(0, 0, 2100, 10))
	if _, hint, fit := fitImage(pngBlock(t, wide), imageLimits{}); fit != imageScaled || !strings.Contains(hint, "original 2100x10") {
		t.Errorf("a 16-bit PNG of 2100x10: %v %q, want scaled", fit, hint)
	}
}

// TestScaleImageWide: scaling an image of many columns takes memory for
// the result, not a table of the source's columns (8 bytes each, 256 MiB
// for a PNG of 2^25x1), and maps each column right where column × width
// is past 2^31 (a 32-bit build).
func TestScaleImageWide(t *testing.T) {
	src := image.NewGray(image.Rect(0, 0, 1<<22, 1))
	for x := 1 << 21; x < 1<<22; x++ {
		src.Pix[x] = 0xff // the right half white
	}
	var dst *image.RGBA
	if n := allocated(func() { dst = scaleImage(src, 2000, 1) }); n > 1<<20 {
		t.Errorf("%d bytes allocated to scale it", n)
	}
	for x, want := range map[int]uint8{0: 0, 999: 0, 1000: 0xff, 1999: 0xff} {
		if got := dst.RGBAAt(x, 0); got != (color.RGBA{want, want, want, 0xff}) {
			t.Errorf("column %d: %v, want grey %d", x, got, want)
		}
	}
}

// withOrientation is the JPEG raw with an Exif marker after its start
// saying orientation o (a big-endian TIFF of one entry).
func withOrientation(raw []byte, o byte) []byte {
	exif := []byte("\xff\xe1\x00\x22Exif\x00\x00MM\x00\x2a\x00\x00\x00\x08\x00\x01\x01\x12\x00\x03\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00")
	exif[29] = o
	return append(append(append([]byte(nil), raw[:2]...), exif...), raw[2:]...)
}

// TestFitImageOrientation: a JPEG whose Exif orientation says it is
// turned (a phone's photo) is scaled upright, as pi's applyExifOrientation
// turns it, and the note gives the upright sizes: scaled, it is encoded
// again without its Exif, and went on its side.
func TestFitImageOrientation(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 3000, 1000))
	for y := range 1000 {
		for x := range 3000 {
			c := color.RGBA{0, 0, 0xff, 0xff} // blue on the right
			if x < 1000 {
				c = color.RGBA{0xff, 0, 0, 0xff} // red on the left
			}
			src.SetRGBA(x, y, c)
		}
	}
	plain := jpegBlock(t, src)
	raw, _ := base64.StdEncoding.DecodeString(plain.Data)
	red := func(c color.Color) bool { r, _, b, _ := c.RGBA(); return r > b }
	for o, want := range map[byte]struct {
		w, h                 int
		topLeft, bottomRight bool // red there
	}{1: {2000, 667, true, false}, 6: {667, 2000, true, false}, 8: {667, 2000, false, true}, 3: {2000, 667, false, true}} {
		in := contentBlock{Type: "image", MimeType: "image/jpeg", Data: base64.StdEncoding.EncodeToString(withOrientation(raw, o))}
		out, hint, fit := fitImage(in, imageLimits{})
		if fit != imageScaled {
			t.Fatalf("orientation %d: fit %v", o, fit)
		}
		ow, oh := 3000, 1000
		if want.w < want.h {
			ow, oh = 1000, 3000
		}
		if wantHint := fmt.Sprintf("[Image: original %dx%d, displayed at %dx%d. Multiply coordinates by 1.50 to map to original image.]", ow, oh, want.w, want.h); hint != wantHint {
			t.Errorf("orientation %d: hint %q, want %q", o, hint, wantHint)
		}
		scaled, _ := base64.StdEncoding.DecodeString(out.Data)
		img, _, err := image.Decode(bytes.NewReader(scaled))
		if err != nil {
			t.Fatal(err)
		}
		if b := img.Bounds(); b.Dx() != want.w || b.Dy() != want.h {
			t.Errorf("orientation %d: %dx%d, want %dx%d", o, b.Dx(), b.Dy(), want.w, want.h)
		}
		if red(img.At(2, 2)) != want.topLeft || red(img.At(want.w-3, want.h-3)) != want.bottomRight {
			t.Errorf("orientation %d: red at the top left %v, bottom right %v; want %v, %v", o,
				red(img.At(2, 2)), red(img.At(want.w-3, want.h-3)), want.topLeft, want.bottomRight)
		}
	}
}

// TestOrient: each Exif orientation puts source pixel (x, y) of a w×h
// image where pi's applyExifOrientation puts it.
func TestOrient(t *testing.T) {
	w, h := 3, 2
	src := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range src.Pix {
		src.Pix[i] = byte(i / 4)
	}
	pi := map[int]func(x, y int) (int, int){
		1: func(x, y int) (int, int) { return x, y },
		2: func(x, y int) (int, int) { return w - 1 - x, y },
		3: func(x, y int) (int, int) { return w - 1 - x, h - 1 - y },
		4: func(x, y int) (int, int) { return x, h - 1 - y },
		5: func(x, y int) (int, int) { return y, x },
		6: func(x, y int) (int, int) { return h - 1 - y, x },
		7: func(x, y int) (int, int) { return h - 1 - y, w - 1 - x },
		8: func(x, y int) (int, int) { return y, w - 1 - x },
	}
	for o, at := range pi {
		out := orient(src, o)
		for y := range h {
			for x := range w {
				dx, dy := at(x, y)
				if got := out.RGBAAt(dx, dy); got != src.RGBAAt(x, y) {
					t.Errorf("orientation %d: (%d,%d) went elsewhere than (%d,%d)", o, x, y, dx, dy)
				}
			}
		}
	}
}

// TestFitImageOneAtATime: an image is decoded and scaled under
// imageScaling.mu, so that sessions scaling at once (rpi serve's) take
// the memory of one.
func TestFitImageOneAtATime(t *testing.T) {
	held := false
	imageDecoded = func() {
		if scaling.mu.TryLock() {
			scaling.mu.Unlock()
		} else {
			held = true
		}
	}
	defer func() { imageDecoded = nil }()
	if _, _, fit := fitImage(pngBlock(t, flatImage(2100, 3)), imageLimits{}); fit != imageScaled || !held {
		t.Errorf("fit %v; decoded under imageScaling.mu: %v", fit, held)
	}
}

// TestFitImageGIFScreen: a GIF's first frame smaller than its screen is
// scaled on the screen, transparent where the frame does not reach (as
// pi's decoder gives it), and the note says the screen's size: it was
// scaled alone, "original 10x10".
func TestFitImageGIFScreen(t *testing.T) {
	frame := image.NewPaletted(image.Rect(2990, 90, 3000, 100), color.Palette{color.Transparent, color.White})
	for i := range frame.Pix {
		frame.Pix[i] = 1
	}
	var b bytes.Buffer
	if err := gif.EncodeAll(&b, &gif.GIF{Image: []*image.Paletted{frame}, Delay: []int{0},
		Config: image.Config{ColorModel: frame.Palette, Width: 3000, Height: 100}}); err != nil {
		t.Fatal(err)
	}
	in := contentBlock{Type: "image", MimeType: "image/gif", Data: base64.StdEncoding.EncodeToString(b.Bytes())}
	out, hint, fit := fitImage(in, imageLimits{})
	if want := "[Image: original 3000x100, displayed at 2000x67. Multiply coordinates by 1.50 to map to original image.]"; fit != imageScaled || hint != want {
		t.Fatalf("fit %v, hint %q; want %q", fit, hint, want)
	}
	raw, _ := base64.StdEncoding.DecodeString(out.Data)
	img, _, err := image.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, a := img.At(0, 0).RGBA(); a != 0 && out.MimeType == "image/png" {
		t.Errorf("the screen's top left is not transparent: %v", img.At(0, 0))
	}
	if r, _, _, _ := img.At(1999, 66).RGBA(); r < 0x8000 {
		t.Errorf("the frame at the bottom right is not white: %v", img.At(1999, 66))
	}
}

// TestFitImageManyScans: a JPEG of more than maxJPEGScans scans goes as
// it is, not decoded: each scan of a progressive JPEG passes over every
// block of the image, and one that skips them all takes a few dozen
// bytes, so a file of a few MB held the decoder (and every session's
// scaling, one at a time) for many minutes.
func TestFitImageManyScans(t *testing.T) {
	one := jpegHeader(2100, 40, true, []byte{0x11}, -1)
	scan := one[len(one)-10:] // its scan's header: the same again and again
	if scan[0] != 0xff || scan[1] != 0xda {
		t.Fatalf("the scan is not at the end: % x", scan)
	}
	many := append([]byte(nil), one...)
	for range maxJPEGScans {
		many = append(many, scan...)
	}
	for name, c := range map[string]struct {
		raw  []byte
		want imageFit
	}{"one scan": {one, imageBroken}, "many scans": {many, imageKept}} {
		in := contentBlock{Type: "image", MimeType: "image/jpeg", Data: base64.StdEncoding.EncodeToString(c.raw)}
		if _, _, fit := fitImage(in, imageLimits{}); fit != c.want {
			t.Errorf("%s: fit %v, want %v", name, fit, c.want)
		}
	}
}
