package main

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
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
