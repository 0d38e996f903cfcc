package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkDecodeEntrySlowPath: decodeEntry of the lines of the session
// files in testdata/sessions, each written with its first key's first
// letter escaped ("\u0074ype"), which the fast path declines: what
// encoding/json's reading with keys matched exactly (unmarshalExact)
// costs on lines that have no key in another case.
func BenchmarkDecodeEntrySlowPath(b *testing.B) {
	files, _ := filepath.Glob("testdata/sessions/*.jsonl")
	var lines [][]byte
	size := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		for line := range bytes.Lines(data) {
			line = bytes.TrimSpace(line)
			if i := bytes.IndexByte(line, '"'); i >= 0 && i+1 < len(line) && line[i+1] >= 'a' && line[i+1] <= 'z' {
				escaped := append(append(append([]byte(nil), line[:i+1]...), `\u00`...), hexDigits[line[i+1]>>4], hexDigits[line[i+1]&0xf])
				lines = append(lines, append(escaped, line[i+2:]...))
				size += len(lines[len(lines)-1])
			}
		}
	}
	b.SetBytes(int64(size))
	var d jsonIn
	for b.Loop() {
		for _, line := range lines {
			decodeEntry(line, &d)
		}
	}
}
