package main

// Images made to fit as they enter the conversation, as pi does it: an
// image a prompt, the read tool or any other tool gives of more than the
// model's resize profile allows (by default 2000 px a side or 4.5 MiB of
// base64) is scaled down and encoded again (PNG or JPEG, whichever is
// smaller), once, and the smaller one is what the session keeps and every
// later request sends.

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"strconv"
	"strings"
)

// imageLimits is what an image is made to fit as it enters the
// conversation: a model's resize profile (models.json's
// inputLimits.images.resize, pi's): the most pixels wide and high, the
// most base64 (an image must have less), and the JPEG quality tried
// first. A field 0 is the default's (fit).
type imageLimits struct{ maxWidth, maxHeight, maxBytes, jpegQuality int }

// defaultImageLimits are pi's: 2000 px a side, 4.5 MiB of base64 (under
// the 5 MiB Anthropic takes: an image must have less), JPEG quality 80.
var defaultImageLimits = imageLimits{maxImageSide, maxImageSide, 9 << 19, 80}

// maxImageSide is the most pixels a side rpi scales an image to (pi's
// default): a profile asking for more has this (inputLimits.check), so
// that no profile makes a scaled image take more memory than the
// default's does.
const maxImageSide = 2000

// fit is l with the default's fields for those it does not give.
func (l imageLimits) fit() imageLimits {
	d := defaultImageLimits
	return imageLimits{cmp.Or(l.maxWidth, d.maxWidth), cmp.Or(l.maxHeight, d.maxHeight),
		cmp.Or(l.maxBytes, d.maxBytes), cmp.Or(l.jpegQuality, d.jpegQuality)}
}

// inputLimits is a model's inputLimits in models.json (pi's): rpi acts
// on images.resize, the profile its images are made to fit; the rest,
// which pi describes but does not act on either, is taken (integers) and
// not used.
type inputLimits struct {
	MaxRequestBytes *int `json:"maxRequestBytes"`
	Images          *struct {
		Resize *struct {
			MaxWidth    *int `json:"maxWidth"`
			MaxHeight   *int `json:"maxHeight"`
			MaxBytes    *int `json:"maxBytes"`
			JPEGQuality *int `json:"jpegQuality"`
		} `json:"resize"`
		MaxPerMessage *int `json:"maxPerMessage"`
		MaxPerRequest *int `json:"maxPerRequest"`
	} `json:"images"`
}

// resizeField is a field of a resize profile in models.json: its name,
// where its value is, and its default.
type resizeField struct {
	name  string
	value **int
	def   int
}

// resizeFields are the fields of l's resize profile, in imageLimits'
// order (none when it has none).
func (l *inputLimits) resizeFields() []resizeField {
	if l == nil || l.Images == nil || l.Images.Resize == nil {
		return nil
	}
	r, d := l.Images.Resize, defaultImageLimits
	return []resizeField{{"maxWidth", &r.MaxWidth, d.maxWidth}, {"maxHeight", &r.MaxHeight, d.maxHeight},
		{"maxBytes", &r.MaxBytes, d.maxBytes}, {"jpegQuality", &r.JPEGQuality, d.jpegQuality}}
}

// usable is what rpi uses of v as f's value: v, maxImageSide for a side
// above it, or 0 (the field left out) for a value it cannot use (not
// above 0, a JPEG quality above 100).
func (f resizeField) usable(v int) int {
	switch {
	case v <= 0 || f.name == "jpegQuality" && v > 100:
		return 0
	case (f.name == "maxWidth" || f.name == "maxHeight") && v > maxImageSide:
		return maxImageSide
	}
	return v
}

// profile is what l's resize profile gives as check leaves it (a field
// 0: it gives none), l unchanged.
func (l *inputLimits) profile() imageLimits {
	var p imageLimits
	for i, f := range l.resizeFields() {
		if *f.value != nil {
			*p.fields()[i] = f.usable(**f.value)
		}
	}
	return p
}

// fields are l's fields, in resizeFields' order.
func (l *imageLimits) fields() []*int {
	return []*int{&l.maxWidth, &l.maxHeight, &l.maxBytes, &l.jpegQuality}
}

// check leaves out of l's resize profile the values rpi cannot use, and
// makes a side above maxImageSide maxImageSide; it says which, and what
// holds instead: own's value (the profile of the model l is over, for
// an override), else the default.
func (l *inputLimits) check(own imageLimits) []string {
	var problems []string
	for i, f := range l.resizeFields() {
		v := *f.value
		if v == nil {
			continue
		}
		name := "inputLimits.images.resize." + f.name
		switch use := f.usable(*v); {
		case use == 0:
			limit := "not above 0"
			if f.name == "jpegQuality" {
				limit = "not 1 to 100"
			}
			instead := fmt.Sprintf("the default is %d", f.def)
			if mine := *own.fields()[i]; mine != 0 {
				instead = fmt.Sprintf("the model's own is %d", mine)
			}
			problems = append(problems, fmt.Sprintf("ignored %q: %d is %s; %s", name, *v, limit, instead))
			*f.value = nil
		case use != *v:
			problems = append(problems, fmt.Sprintf("%q: %d is above %d, the most rpi scales an image to; %d used", name, *v, maxImageSide, use))
			*v = use
		}
	}
	return problems
}

// over is base with the fields l's resize profile gives over it (pi
// merges an override's so).
func (l *inputLimits) over(base imageLimits) imageLimits {
	fields := l.resizeFields()
	if fields == nil {
		return base
	}
	for i, into := range base.fields() {
		*into = ptrOr(*fields[i].value, *into)
	}
	return base
}

// imageLimits is what an image is made to fit as it enters the
// conversation with m in use (the default when m is nil).
func (m *model) imageLimits() imageLimits {
	if m == nil {
		return defaultImageLimits
	}
	return m.resize.fit()
}

// imageJPEGQualities are the qualities tried after the profile's, when
// neither PNG nor JPEG at that one has less than its most base64 (pi's
// list, in its order, without the profile's).
var imageJPEGQualities = []int{85, 70, 55, 40}

// maxScalePixels is the most pixels (width × height, as the header says
// them) of an image rpi decodes to scale. A larger one goes as it is, like
// one rpi cannot decode (WebP), and what the model's API refuses of it is
// a note in the request (anthropicImages).
const maxScalePixels = 1 << 25

// maxDecodeBytes is the most memory decoding an image to scale may take,
// as decodeCost reckons it from the header: 128 MiB, what an 8-bit PNG
// of maxScalePixels takes (4 bytes a pixel). A header is all it takes to
// make the standard library allocate the whole image, even when no pixel
// data follows, and the bytes a pixel differ eightfold: a 16-bit PNG
// takes 8, a progressive CMYK JPEG 24 (its coefficients are kept), so a
// pixel budget alone let a file of a few dozen bytes cost 768 MiB. An
// image past it goes as it is, as one of too many pixels does.
const maxDecodeBytes = 1 << 27

// maxJPEGScans is the most scans of a JPEG rpi decodes to scale. Each
// scan of a progressive JPEG passes over every block of the image (of
// 5792x5792, half a million blocks a component), and one that skips them
// all takes a few dozen bytes: thousands of scans are minutes of work.
// An encoder's progressive JPEG has about ten (libjpeg's script) and at
// most a few dozen.
const maxJPEGScans = 100

// imageScaling's lock is held while an image is decoded, scaled and
// encoded: one at a time in the whole process (scaling), so that the
// sessions of rpi serve, each scaling a tool's image at once, take
// maxDecodeBytes and what scaling adds once, not once each.
type imageScaling struct{ mu mutex[imageScalingMu] }

var scaling imageScaling

// imageDecoded, when set (by a test), is called as an image has been
// decoded to be scaled.
var imageDecoded func()

// imageOmitted is what stands in the place of an image that is not a
// picture rpi can decode (pi's text, for one it cannot scale).
const imageOmitted = "[Image omitted: could not be resized below the inline image size limit.]"

// imageFit says what fitImage made of an image.
type imageFit int

const (
	imageKept   imageFit = iota // it goes as it is: within the limits, or not one rpi can decode (WebP, too many pixels)
	imageScaled                 // encoded again, smaller; the hint says from what size to what
	imageBroken                 // a PNG, JPEG or GIF past a limit that does not decode
)

// fitImage is image block b made to fit the limits: as it is when it
// does already, when its size cannot be read from its header (not an
// image rpi knows), when it is WebP (which the standard library cannot
// decode), of more than maxScalePixels, or when decoding it would take
// more than maxDecodeBytes or maxJPEGScans; else decoded (one at a time:
// scaling), turned as its Exif says, scaled to at most lim's width and
// height and encoded as the smaller of PNG and JPEG (at lim's quality);
// while that has lim's most base64 or more, as JPEG of lower qualities,
// then at three quarters of the size, again and again. The hint, for an
// image scaled, is pi's note of the two sizes.
func fitImage(b contentBlock, lim imageLimits) (out contentBlock, hint string, fit imageFit) {
	lim = lim.fit()
	w, h, ok := imageSize(b.Data)
	switch {
	case !ok, w <= lim.maxWidth && h <= lim.maxHeight && len(b.Data) < lim.maxBytes:
		return b, "", imageKept
	case int64(w)*int64(h) > maxScalePixels:
		return b, "", imageKept
	}
	raw, err := base64.StdEncoding.DecodeString(b.Data)
	switch {
	case err != nil:
		return b, "", imageBroken
	case imageType(raw) == "image/webp": // whatever its block says it is
		return b, "", imageKept
	}
	if imageType(raw) == "image/jpeg" && jpegScans(raw) > maxJPEGScans {
		return b, "", imageKept
	}
	if cost, ok := decodeCost(raw); !ok {
		return b, "", imageBroken // a header the decoder would refuse
	} else if cost > maxDecodeBytes {
		return b, "", imageKept
	}
	scaling.mu.Lock()
	defer scaling.mu.Unlock()
	img, format, err := image.Decode(bytes.NewReader(raw))
	if err != nil {
		return b, "", imageBroken
	}
	if frame, ok := img.(*image.Paletted); ok && format == "gif" && frame.Rect != image.Rect(0, 0, w, h) {
		img = onScreen{frame, image.Rect(0, 0, w, h)}
	}
	if imageDecoded != nil {
		imageDecoded()
	}
	turn := exifOrientation(raw)
	raw = nil
	ow, oh := img.Bounds().Dx(), img.Bounds().Dy()
	if turn >= 5 { // turned a quarter: its sides as it is seen
		ow, oh = oh, ow
	}
	tw, th := fitSides(ow, oh, lim)
	for {
		var small *image.RGBA
		if turn >= 5 {
			small = orient(scaleImage(img, th, tw), turn)
		} else {
			small = orient(scaleImage(img, tw, th), turn)
		}
		if data, mime, ok := encodeFitting(small, lim); ok {
			scaled := contentBlock{Type: "image", Data: data, MimeType: mime}
			return scaled, fmt.Sprintf("[Image: original %dx%d, displayed at %dx%d. Multiply coordinates by %s to map to original image.]",
				ow, oh, tw, th, fixed2(float64(ow)/float64(tw))), imageScaled
		}
		if tw == 1 && th == 1 {
			return b, "", imageBroken
		}
		tw, th = max(1, tw*3/4), max(1, th*3/4)
	}
}

// onScreen is a GIF's first frame on its screen (the size its header
// says, which the frame may not fill): transparent where the frame does
// not reach, as pi's decoder gives a GIF.
type onScreen struct {
	frame  *image.Paletted
	screen image.Rectangle
}

func (s onScreen) ColorModel() color.Model { return s.frame.ColorModel() }
func (s onScreen) Bounds() image.Rectangle { return s.screen }
func (s onScreen) At(x, y int) color.Color { return s.RGBA64At(x, y) }
func (s onScreen) RGBA64At(x, y int) color.RGBA64 {
	if !(image.Point{x, y}).In(s.frame.Rect) {
		return color.RGBA64{}
	}
	return s.frame.RGBA64At(x, y)
}

// fitSides is the size of a w×h image scaled to at most lim's width and
// height, its shape kept (rounded as pi rounds, but never to 0 px).
func fitSides(w, h int, lim imageLimits) (int, int) {
	if w > lim.maxWidth {
		h, w = max(1, int(math.Round(float64(h)*float64(lim.maxWidth)/float64(w)))), lim.maxWidth
	}
	if h > lim.maxHeight {
		w, h = max(1, int(math.Round(float64(w)*float64(lim.maxHeight)/float64(h)))), lim.maxHeight
	}
	return w, h
}

// encodeFitting is img as base64 of less than lim's most: the smaller of
// PNG and JPEG at lim's quality, else JPEG at the qualities of
// imageJPEGQualities in turn; false when none is small enough.
func encodeFitting(img image.Image, lim imageLimits) (data, mime string, ok bool) {
	var pngBuf bytes.Buffer
	if err := png.Encode(&pngBuf, img); err != nil {
		return "", "", false
	}
	encodeJPEG := func(quality int) []byte {
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: quality}); err != nil {
			return nil
		}
		return buf.Bytes()
	}
	fits := func(b []byte) bool { return b != nil && base64.StdEncoding.EncodedLen(len(b)) < lim.maxBytes }
	first := encodeJPEG(lim.jpegQuality)
	tries := []struct {
		b    []byte
		mime string
	}{{pngBuf.Bytes(), "image/png"}, {first, "image/jpeg"}}
	if first != nil && len(first) < pngBuf.Len() {
		tries[0], tries[1] = tries[1], tries[0]
	}
	for _, t := range tries {
		if fits(t.b) {
			return base64.StdEncoding.EncodeToString(t.b), t.mime, true
		}
	}
	for _, q := range imageJPEGQualities {
		if q == lim.jpegQuality {
			continue // tried first
		}
		if b := encodeJPEG(q); fits(b) {
			return base64.StdEncoding.EncodeToString(b), "image/jpeg", true
		}
	}
	return "", "", false
}

// scaleImage is src made w×h (no larger than it) by area averaging: each
// pixel of the result is the mean of the block of source pixels that
// falls on it, alpha-weighted (the colours are premultiplied).
func scaleImage(src image.Image, w, h int) *image.RGBA {
	r := src.Bounds()
	sw, sh := r.Dx(), r.Dy()
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	at := func(x, y int) (uint32, uint32, uint32, uint32) { return src.At(x, y).RGBA() }
	if fast, ok := src.(image.RGBA64Image); ok { // every decoded image: no allocation a pixel
		at = func(x, y int) (uint32, uint32, uint32, uint32) {
			c := fast.RGBA64At(x, y)
			return uint32(c.R), uint32(c.G), uint32(c.B), uint32(c.A)
		}
	}
	// Source column sx falls in column sx*w/sw of the result, row sy in
	// row sy*h/sh: stepped to, in 64 bits (sx*w passes 2^31), with no
	// table of the source's columns (which may be 2^25).
	sum := make([]uint64, 4*w)
	count := make([]uint64, w)
	sy := 0
	for y := range h {
		clear(sum)
		clear(count)
		for ; sy < sh && int64(sy)*int64(h)/int64(sh) == int64(y); sy++ {
			d, next := 0, int64(sw) // the column sx falls in, and where the one after it starts (in sx*w)
			for sx := range sw {
				for int64(sx)*int64(w) >= next {
					d, next = d+1, next+int64(sw)
				}
				cr, cg, cb, ca := at(r.Min.X+sx, r.Min.Y+sy)
				sum[4*d] += uint64(cr)
				sum[4*d+1] += uint64(cg)
				sum[4*d+2] += uint64(cb)
				sum[4*d+3] += uint64(ca)
				count[d]++
			}
		}
		for x := range w {
			n := count[x] * 0x101 // 16-bit sums to 8-bit means
			if n == 0 {
				continue
			}
			p := dst.Pix[y*dst.Stride+4*x:]
			for i := range 4 {
				p[i] = uint8((sum[4*x+i] + n/2) / n)
			}
		}
	}
	return dst
}

// fixed2 is x with two decimals as JavaScript's toFixed(2) writes it,
// which rounds a tie up (Go's formatting rounds it to even): a ratio of
// image sides is a tie when it is a whole number of eighths.
func fixed2(x float64) string {
	if e := x * 8; e == math.Trunc(e) {
		x = math.Floor(x*100+0.5) / 100
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// fitResultImages is a tool result's content with its images made to fit
// (fitImage, to lim), each image scaled followed by a text block of its
// hint, as pi normalises every tool's result; an image that does not
// decode stays as it is (the tool gave it). The content itself when
// nothing changed.
func fitResultImages(content []contentBlock, lim imageLimits) []contentBlock {
	var out []contentBlock
	for i, b := range content {
		if b.Type != "image" {
			if out != nil {
				out = append(out, b)
			}
			continue
		}
		scaled, hint, fit := fitImage(b, lim)
		if fit != imageScaled {
			if out != nil {
				out = append(out, b)
			}
			continue
		}
		if out == nil {
			out = append([]contentBlock(nil), content[:i]...)
		}
		out = append(out, scaled, contentBlock{Type: "text", Text: hint})
	}
	if out == nil {
		return content
	}
	return out
}

// fitPromptImages makes the images of a user's message fit (fitImage, to
// lim) as it joins the conversation, as pi does a prompt's: an image
// scaled is replaced, one that does not decode left out, and their hints
// (pi's texts) are added to the message's first text, after a blank line.
func fitPromptImages(m *userMessage, lim imageLimits) {
	var hints []string
	var content []contentBlock
	changed := false
	for _, b := range m.Content {
		if b.Type != "image" {
			content = append(content, b)
			continue
		}
		scaled, hint, fit := fitImage(b, lim)
		switch fit {
		case imageKept:
			content = append(content, b)
		case imageScaled:
			content = append(content, scaled)
			hints = append(hints, hint)
		case imageBroken:
			hints = append(hints, imageOmitted)
		}
		changed = changed || fit != imageKept
	}
	if !changed {
		return
	}
	if len(hints) > 0 && len(content) > 0 && content[0].Type == "text" {
		content[0].Text += "\n\n" + strings.Join(hints, "\n")
	}
	m.Content = content
}

// decodeCost is what decoding the PNG, JPEG or GIF raw with the standard
// library allocates at most, in bytes, as its header says: for a PNG the
// image (8 bytes a pixel at 16 bits a sample, 1 for a palette, else 4;
// twice that interlaced, whose passes are images too) and its row
// buffers; for a JPEG its planes, a progressive one's coefficients (4
// bytes a pixel of each component) and the RGB or CMYK image an RGB or
// four-component one is made into; for a GIF its frame (1 byte a pixel,
// twice for an interlaced one), never larger than its screen. False when
// the header is not one the decoder takes.
func decodeCost(raw []byte) (int64, bool) {
	switch imageType(raw) {
	case "image/png":
		return pngDecodeCost(raw)
	case "image/jpeg":
		return jpegDecodeCost(raw)
	case "image/gif":
		if len(raw) < 10 {
			return 0, false
		}
		w, h := int64(binary.LittleEndian.Uint16(raw[6:8])), int64(binary.LittleEndian.Uint16(raw[8:10]))
		return 2 * w * h, true
	}
	return 0, false
}

// pngDecodeCost is decodeCost of a PNG: its IHDR's size, bit depth,
// colour type and interlace method.
func pngDecodeCost(raw []byte) (int64, bool) {
	if len(raw) < 29 || string(raw[12:16]) != "IHDR" {
		return 0, false
	}
	w, h := int64(binary.BigEndian.Uint32(raw[16:20])), int64(binary.BigEndian.Uint32(raw[20:24]))
	depth, colour, interlaced := int64(raw[24]), raw[25], raw[28] == 1
	channels := map[byte]int64{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour]
	if channels == 0 || depth == 0 || depth > 16 {
		return 0, false
	}
	pixel := int64(4) // RGBA or NRGBA; a grey one with a transparent colour too
	switch {
	case depth == 16:
		pixel = 8
	case colour == 3:
		pixel = 1
	}
	image := w * h * pixel
	if interlaced {
		image *= 2
	}
	row := 1 + (w*channels*depth+7)/8 // the row and the one before it, of each pass
	return image + 4*row, true
}

// jpegDecodeCost is decodeCost of a JPEG: its markers walked as the
// decoder walks them, to its frame header (SOF0, SOF1 or SOF2, the ones
// it decodes), noting a JFIF or Adobe marker before it (which decide
// whether three components are RGB).
func jpegDecodeCost(raw []byte) (int64, bool) {
	jfif, adobe, transform := false, false, byte(0)
	for i := 2; ; {
		for i < len(raw) && raw[i] != 0xff { // what libjpeg skips, and so the decoder
			i++
		}
		for i < len(raw) && raw[i] == 0xff {
			i++
		}
		if i+3 > len(raw) {
			return 0, false
		}
		marker := raw[i]
		if marker == 0 || 0xd0 <= marker && marker <= 0xd7 { // stuffed data, restarts: no length
			i++
			continue
		}
		n := int(raw[i+1])<<8 | int(raw[i+2])
		if n < 2 || marker == 0xd9 || marker == 0xda { // the end, or data before a frame header
			return 0, false
		}
		seg := raw[i+3 : min(len(raw), i+1+n)]
		switch marker {
		case 0xe0:
			jfif = jfif || len(seg) >= 5 && string(seg[:5]) == "JFIF\x00"
		case 0xee:
			if len(seg) >= 12 && string(seg[:5]) == "Adobe" {
				adobe, transform = true, seg[11]
			}
		case 0xc0, 0xc1, 0xc2:
			return jpegFrameCost(seg, marker == 0xc2, !jfif && adobe && transform == 0)
		}
		i += 1 + n
	}
}

// jpegFrameCost is decodeCost of a JPEG whose frame header is seg: the
// planes its components are decoded into (whole blocks of whole MCUs),
// with progressive their coefficients, and the image an RGB (rgb: said
// so by an Adobe marker, or by its components' names) or four-component
// one is made into at the end.
func jpegFrameCost(seg []byte, progressive, rgb bool) (int64, bool) {
	if len(seg) < 6 {
		return 0, false
	}
	h, w, n := int64(seg[1])<<8|int64(seg[2]), int64(seg[3])<<8|int64(seg[4]), int(seg[5])
	if n != 1 && n != 3 && n != 4 || len(seg) < 6+3*n {
		return 0, false
	}
	hv := func(c int) (int64, int64) {
		if n == 1 { // the decoder takes one component's factors as 1
			return 1, 1
		}
		f := seg[7+3*c]
		return max(1, int64(f>>4)), max(1, int64(f&0x0f))
	}
	h0, v0 := hv(0)
	mcus := (w + 8*h0 - 1) / (8 * h0) * ((h + 8*v0 - 1) / (8 * v0))
	var cost int64
	for c := range n {
		ch, cv := hv(c)
		blocks := mcus * ch * cv
		cost += blocks * 64 // a byte a sample
		if progressive {
			cost += blocks * 64 * 4 // an int32 a coefficient
		}
	}
	if n == 4 || rgb || n == 3 && string([]byte{seg[6], seg[9], seg[12]}) == "RGB" {
		cost += 4 * w * h
	}
	return cost, true
}

// exifOrientation is the orientation a JPEG's Exif says (1 to 8, as TIFF
// numbers them; 1, upright, when it says none), found as pi's
// applyExifOrientation finds it: in the first IFD of an APP1 "Exif"
// marker before the image data. Scaled, an image is encoded again
// without its Exif, so it is turned upright (orient) first.
func exifOrientation(raw []byte) int {
	if imageType(raw) != "image/jpeg" {
		return 1
	}
	tiff := -1
	for i := 2; i+4 <= len(raw) && raw[i] == 0xff && tiff < 0; {
		switch marker := raw[i+1]; {
		case marker == 0xff:
			i++
			continue
		case marker == 0xe1 && i+10 <= len(raw) && string(raw[i+4:i+10]) == "Exif\x00\x00":
			tiff = i + 10
		case marker == 0xda:
			return 1
		}
		i += 2 + (int(raw[i+2])<<8 | int(raw[i+3]))
	}
	if tiff < 0 || tiff+8 > len(raw) {
		return 1
	}
	var order binary.ByteOrder = binary.BigEndian
	if string(raw[tiff:tiff+2]) == "II" {
		order = binary.LittleEndian
	}
	ifd := tiff + int(order.Uint32(raw[tiff+4:]))
	if ifd < tiff || ifd+2 > len(raw) {
		return 1
	}
	for e := range int(order.Uint16(raw[ifd:])) {
		at := ifd + 2 + 12*e
		if at+12 > len(raw) {
			return 1
		}
		if order.Uint16(raw[at:]) == 0x0112 {
			if o := int(order.Uint16(raw[at+8:])); o >= 1 && o <= 8 {
				return o
			}
			return 1
		}
	}
	return 1
}

// orient is img turned as Exif orientation o says the picture is seen:
// flipped (2, 4), turned half round (3), a quarter clockwise (6) or
// anticlockwise (8), or transposed (5, 7), as pi turns it.
func orient(img *image.RGBA, o int) *image.RGBA {
	if o <= 1 || o > 8 {
		return img
	}
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	ow, oh := w, h
	if o >= 5 {
		ow, oh = h, w
	}
	// Turned a quarter (5 to 8), a picture is its transpose, flipped.
	flipX, flipY := o == 2 || o == 3 || o == 6 || o == 7, o == 3 || o == 4 || o == 7 || o == 8
	out := image.NewRGBA(image.Rect(0, 0, ow, oh))
	for y := range h {
		for x := range w {
			dx, dy := x, y
			if o >= 5 {
				dx, dy = y, x
			}
			if flipX {
				dx = ow - 1 - dx
			}
			if flipY {
				dy = oh - 1 - dy
			}
			copy(out.Pix[dy*out.Stride+4*dx:][:4], img.Pix[y*img.Stride+4*x:][:4])
		}
	}
	return out
}

// jpegScans is how many scans (SOS markers) the JPEG raw has: its
// markers walked, the data of each scan passed over (a 0xff in it is
// followed by 0 or is a restart).
func jpegScans(raw []byte) int {
	scans := 0
	for i := 2; i+1 < len(raw); {
		if raw[i] != 0xff {
			i++
			continue
		}
		switch m := raw[i+1]; {
		case m == 0xff:
			i++
			continue
		case m == 0 || m == 0x01 || 0xd0 <= m && m <= 0xd7: // data, restarts: no length
			i += 2
			continue
		case m == 0xd9:
			return scans
		case m == 0xda:
			scans++
		}
		if i+4 > len(raw) {
			break
		}
		i += 2 + (int(raw[i+2])<<8 | int(raw[i+3]))
	}
	return scans
}
