package main

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// TestNFKC: compatibility mappings, composition, mark order and Hangul, as
// node's normalize("NFKC") gives them.
func TestNFKC(t *testing.T) {
	for in, want := range map[string]string{
		"plain ascii":        "plain ascii",
		"ﬁle":                "file",
		"Ｆｕｌｌ　ｗｉｄｔｈ":         "Full width",
		"wait…":              "wait...",
		"x²\u00a0①":          "x2 1",
		"e\u0301":            "é",
		"a\u0323\u0301":      "\u1ea1\u0301",
		"a\u0301\u0323":      "\u1ea1\u0301",
		"\u1100\u1161\u11a8": "각",
		"각":                  "각",
		"\u212b":             "Å",
		"\u0344":             "\u0308\u0301",
		"ｶﾞ":                 "ガ",
		"bad \xff byte":      "bad \xff byte",
		"™ ½":                "TM 1⁄2",
		// Runs of marks longer than an insertion sort takes (node's result).
		"a" + strings.Repeat("\u0301\u0316", 20) + "b\u0327" + strings.Repeat("\u0301\u0316\u05b0\u0327", 9) + "x": "\u00e1" +
			strings.Repeat("\u0316", 20) + strings.Repeat("\u0301", 19) + "b" + strings.Repeat("\u05b0", 9) +
			strings.Repeat("\u0327", 10) + strings.Repeat("\u0316", 9) + strings.Repeat("\u0301", 9) + "x",
	} {
		if got := nfkc(in); got != want {
			t.Errorf("nfkc(%+q) = %+q, want %+q", in, got, want)
		}
	}
}

// TestNFKCAgainstNode compares nfkc with node's normalize("NFKC") on every
// code point and on random sequences, read from the file that
// RPI_NFKC_ORACLE names (scripts/pi-edit-compare.sh writes it); skipped
// without it.
func TestNFKCAgainstNode(t *testing.T) {
	path := os.Getenv("RPI_NFKC_ORACLE")
	if path == "" {
		t.Skip("RPI_NFKC_ORACLE is not set (scripts/pi-edit-compare.sh sets it)")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n, bad := 0, 0
	for sc.Scan() {
		var pair [2]string
		if err := json.Unmarshal(sc.Bytes(), &pair); err != nil {
			t.Fatal(err)
		}
		n++
		if got := nfkc(pair[0]); got != pair[1] {
			if bad++; bad <= 20 {
				t.Errorf("nfkc(%+q) = %+q, node says %+q", pair[0], got, pair[1])
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d strings compared with node, %d differ", n, bad)
}

// BenchmarkNFKCMarks normalises one letter followed by a run of combining
// marks of alternating classes (what a hostile file holds), 10,000 and
// 80,000 pairs long, and reports the time per mark of each and their
// ratio: about 1 when the work is linear (it was 8 with an insertion sort,
// 53 s for the longer run inside one edit call).
func BenchmarkNFKCMarks(b *testing.B) {
	perMark := func(pairs int) float64 {
		s := "a" + strings.Repeat("\u0301\u0316", pairs)
		start := time.Now()
		for range b.N {
			nfkc(s)
		}
		return float64(time.Since(start).Nanoseconds()) / float64(b.N*2*pairs)
	}
	short, long := perMark(10_000), perMark(80_000)
	b.ReportMetric(short, "ns/mark-10k")
	b.ReportMetric(long, "ns/mark-80k")
	b.ReportMetric(long/short, "80k/10k")
}
