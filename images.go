package main

// What a model server is sent of the images of a conversation: the size of
// an image as its header says it, and the images Anthropic would refuse a
// request for, which go as notes.

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"image"
	_ "image/gif" // image.DecodeConfig reads their headers
	_ "image/jpeg"
	"io"
	"math"
	"strings"
)

// imageSize is the width and height of an image given as base64, as its
// header says them: JPEG and GIF as the standard library reads them, PNG
// and WebP by hand; false for anything else (not base64, another format, a
// header cut short), which rpi cannot judge and sends as it is. Only the
// header is decoded.
func imageSize(data string) (width, height int, ok bool) {
	r := base64.NewDecoder(base64.StdEncoding, strings.NewReader(data))
	var head [30]byte
	n, _ := io.ReadFull(r, head[:])
	for _, size := range []func([]byte) (int, int, bool){webpSize, pngSize} {
		if w, h, is := size(head[:n]); is {
			if w <= 0 || h <= 0 {
				return 0, 0, false
			}
			return w, h, true
		}
	}
	c, _, err := image.DecodeConfig(io.MultiReader(strings.NewReader(string(head[:n])), r))
	if err != nil || c.Width <= 0 || c.Height <= 0 {
		return 0, 0, false
	}
	return c.Width, c.Height, true
}

// pngSize reads the size of a PNG file from its first 24 bytes: isPNG
// reports whether they start as one (its signature), and the size is 0x0
// when its first chunk is not IHDR or is cut short, or a side is 0 or
// more than 2^31-1, which no PNG has. image.DecodeConfig is not asked:
// it refuses a size of more pixels than it could decode (past 2^60, or
// 2^28 on a 32-bit build), which is still a size to judge.
func pngSize(b []byte) (width, height int, isPNG bool) {
	if len(b) < 8 || string(b[:8]) != "\x89PNG\r\n\x1a\n" {
		return 0, 0, false
	}
	if len(b) < 24 || string(b[12:16]) != "IHDR" {
		return 0, 0, true
	}
	w, h := binary.BigEndian.Uint32(b[16:20]), binary.BigEndian.Uint32(b[20:24])
	if w > math.MaxInt32 || h > math.MaxInt32 {
		return 0, 0, true
	}
	return int(w), int(h), true
}

// webpSize reads the canvas size of a WebP file from its first 30 bytes:
// isWebP reports whether they start as one ("RIFF", a size, "WEBP"), and
// the size is 0x0 when its first chunk is none of the three WebP starts
// with (VP8, VP8L, VP8X) or is cut short or malformed.
func webpSize(b []byte) (width, height int, isWebP bool) {
	if len(b) < 16 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WEBP" {
		return 0, 0, false
	}
	switch string(b[12:16]) {
	case "VP8 ": // lossy: a frame tag of 3 bytes, the start code, then 14 bits each
		if len(b) < 30 || b[23] != 0x9d || b[24] != 0x01 || b[25] != 0x2a {
			return 0, 0, true
		}
		return int(binary.LittleEndian.Uint16(b[26:28]) & 0x3fff), int(binary.LittleEndian.Uint16(b[28:30]) & 0x3fff), true
	case "VP8L": // lossless: a signature byte, then width-1 and height-1 in 14 bits each
		if len(b) < 25 || b[20] != 0x2f {
			return 0, 0, true
		}
		bits := binary.LittleEndian.Uint32(b[21:25])
		return int(bits&0x3fff) + 1, int(bits>>14&0x3fff) + 1, true
	case "VP8X": // extended: flags and reserved bytes, then width-1 and height-1 in 24 bits each
		if len(b) < 30 {
			return 0, 0, true
		}
		u24 := func(p []byte) int { return int(p[0]) | int(p[1])<<8 | int(p[2])<<16 }
		return u24(b[24:27]) + 1, u24(b[27:30]) + 1, true
	}
	return 0, 0, true
}

// Anthropic's limits on the images of one request, past which it refuses
// the request (and, since the images stay in the conversation, every later
// one): how many, the most pixels a side, the most a side once there are
// more than anthropicManyImages, and the base64 they may have together
// (the whole request may have 32 MB; this leaves the rest room for text).
const (
	maxAnthropicImages     = 100
	maxAnthropicImageSide  = 8000
	anthropicManyImages    = 20
	maxAnthropicManySide   = 2000
	maxAnthropicImageBytes = 24 << 20
)

// anthropicImages is messages (contextMessages') with each image that
// would have Anthropic refuse the request made a text block saying so, in
// imageNote's form. The newest go: from the newest back, one more than
// 8000 px a side is a note, and the older ones past 100 images or the 24
// MiB of base64 they may have; past 20, one more than 2000 px a side, and
// every older one once one of the 20 is that large. An image imageNote
// leaves out already is not counted; one whose size rpi cannot read
// goes. A message with such an image is a copy; messages are not changed.
func anthropicImages(m *model, messages []any) []any {
	notes := map[[2]int]string{}
	count, size := 0, 0
	large := false // an image going is more than anthropicManySide a side
	for i := len(messages) - 1; i >= 0; i-- {
		content := imageContent(messages[i])
		for j := len(content) - 1; j >= 0; j-- {
			b := content[j]
			if b.Type != "image" || imageNote(m, b) != "" {
				continue
			}
			w, h, _ := imageSize(b.Data)
			switch {
			case max(w, h) > maxAnthropicImageSide:
				notes[[2]int{i, j}] = fmt.Sprintf("[%s image omitted: it is %dx%d px, more than the %d px a side Anthropic takes]",
					b.MimeType, w, h, maxAnthropicImageSide)
			case count == maxAnthropicImages:
				notes[[2]int{i, j}] = fmt.Sprintf("[%s image omitted: Anthropic takes %d images in a request, and %d newer ones went]",
					b.MimeType, maxAnthropicImages, maxAnthropicImages)
			case size+len(b.Data) > maxAnthropicImageBytes:
				notes[[2]int{i, j}] = fmt.Sprintf("[%s image omitted: its %s of base64 would take the request's images past the %s Anthropic's request has room for]",
					b.MimeType, byteSize(len(b.Data)), byteSize(maxAnthropicImageBytes))
			case count >= anthropicManyImages && max(w, h) > maxAnthropicManySide:
				notes[[2]int{i, j}] = fmt.Sprintf("[%s image omitted: it is %dx%d px, more than the %d px a side Anthropic takes in a request of more than %d images]",
					b.MimeType, w, h, maxAnthropicManySide, anthropicManyImages)
			case count >= anthropicManyImages && large:
				notes[[2]int{i, j}] = fmt.Sprintf("[%s image omitted: Anthropic takes %d images in a request with one of more than %d px a side, and %d newer ones went]",
					b.MimeType, anthropicManyImages, maxAnthropicManySide, anthropicManyImages)
			default:
				count, size = count+1, size+len(b.Data)
				large = large || max(w, h) > maxAnthropicManySide
			}
		}
	}
	if len(notes) == 0 {
		return messages
	}
	out := append([]any(nil), messages...)
	copied := map[int][]contentBlock{}
	for at, note := range notes {
		content, ok := copied[at[0]]
		if !ok {
			content = append([]contentBlock(nil), imageContent(messages[at[0]])...)
			copied[at[0]] = content
			switch msg := messages[at[0]].(type) {
			case *userMessage:
				out[at[0]] = &userMessage{Role: msg.Role, Content: content, Timestamp: msg.Timestamp}
			case *toolResultMessage:
				c := *msg
				c.Content = content
				out[at[0]] = &c
			}
		}
		content[at[1]] = contentBlock{Type: "text", Text: note}
	}
	return out
}

// imageContent is the content of a message that may hold images: a user
// message's or a tool result's.
func imageContent(msg any) []contentBlock {
	switch msg := msg.(type) {
	case *userMessage:
		return msg.Content
	case *toolResultMessage:
		return msg.Content
	}
	return nil
}
