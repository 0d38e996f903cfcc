package main

// Images made to fit as they enter the conversation, as pi does it: an
// image a prompt, the read tool or any other tool gives of more than 2000
// px a side or 4.5 MiB of base64 is scaled down and encoded again (PNG or
// JPEG, whichever is smaller), once, and the smaller one is what the
// session keeps and every later request sends.

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"math"
	"strconv"
	"strings"
)

// The limits an image is made to fit (pi's): the most pixels a side, the
// most base64 (4.5 MiB, under the 5 MiB Anthropic takes: an image must
// have less), and the JPEG quality tried first.
const (
	maxImageSide     = 2000
	maxImageBase64   = 9 << 19 // 4.5 MiB
	imageJPEGQuality = 80
)

// imageJPEGQualities are the qualities tried after the first, when
// neither PNG nor JPEG at imageJPEGQuality has less than maxImageBase64
// (pi's list, in its order).
var imageJPEGQualities = []int{85, 70, 55, 40}

// maxScalePixels is the most pixels (width × height, as the header says
// them) of an image rpi decodes to scale: decoded, an image takes up to 8
// bytes a pixel. A larger one goes as it is, like one rpi cannot decode
// (WebP), and what the model's API refuses of it is a note in the request
// (anthropicImages).
const maxScalePixels = 1 << 25

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
// decode) or of more than maxScalePixels; else decoded, scaled to at most
// maxImageSide a side and encoded as the smaller of PNG and JPEG; while
// that has maxImageBase64 of base64 or more, as JPEG of lower qualities,
// then at three quarters of the size, again and again. The hint, for an
// image scaled, is pi's note of the two sizes.
func fitImage(b contentBlock) (out contentBlock, hint string, fit imageFit) {
	w, h, ok := imageSize(b.Data)
	switch {
	case !ok, w <= maxImageSide && h <= maxImageSide && len(b.Data) < maxImageBase64:
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
	img, _, err := image.Decode(bytes.NewReader(raw))
	if err != nil {
		return b, "", imageBroken
	}
	raw = nil
	ow, oh := img.Bounds().Dx(), img.Bounds().Dy()
	tw, th := fitSides(ow, oh)
	for {
		small := scaleImage(img, tw, th)
		if data, mime, ok := encodeFitting(small); ok {
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

// fitSides is the size of a w×h image scaled to at most maxImageSide a
// side, its shape kept (rounded as pi rounds, but never to 0 px).
func fitSides(w, h int) (int, int) {
	if w > maxImageSide {
		h, w = max(1, int(math.Round(float64(h)*maxImageSide/float64(w)))), maxImageSide
	}
	if h > maxImageSide {
		w, h = max(1, int(math.Round(float64(w)*maxImageSide/float64(h)))), maxImageSide
	}
	return w, h
}

// encodeFitting is img as base64 of less than maxImageBase64: the smaller
// of PNG and JPEG at imageJPEGQuality, else JPEG at the lower qualities of
// imageJPEGQualities in turn; false when none is small enough.
func encodeFitting(img image.Image) (data, mime string, ok bool) {
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
	fits := func(b []byte) bool { return b != nil && base64.StdEncoding.EncodedLen(len(b)) < maxImageBase64 }
	first := encodeJPEG(imageJPEGQuality)
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
	col := make([]int, sw) // the column of the result each source column falls in
	for x := range col {
		col[x] = x * w / sw
	}
	sum := make([]uint64, 4*w)
	count := make([]uint64, w)
	sy := 0
	for y := range h {
		clear(sum)
		clear(count)
		for ; sy < sh && sy*h/sh == y; sy++ {
			for sx := range sw {
				cr, cg, cb, ca := at(r.Min.X+sx, r.Min.Y+sy)
				d := col[sx]
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
// (fitImage), each image scaled followed by a text block of its hint, as
// pi normalises every tool's result; an image that does not decode stays
// as it is (the tool gave it). The content itself when nothing changed.
func fitResultImages(content []contentBlock) []contentBlock {
	var out []contentBlock
	for i, b := range content {
		if b.Type != "image" {
			if out != nil {
				out = append(out, b)
			}
			continue
		}
		scaled, hint, fit := fitImage(b)
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

// fitPromptImages makes the images of a user's message fit (fitImage) as
// it joins the conversation, as pi does a prompt's: an image scaled is
// replaced, one that does not decode left out, and their hints (pi's
// texts) are added to the message's first text, after a blank line.
func fitPromptImages(m *userMessage) {
	var hints []string
	var content []contentBlock
	changed := false
	for _, b := range m.Content {
		if b.Type != "image" {
			content = append(content, b)
			continue
		}
		scaled, hint, fit := fitImage(b)
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
