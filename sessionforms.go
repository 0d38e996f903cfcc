package main

// Every valid form of a session line at the fast path's speed. JSON
// lets a line be written in many ways that mean the same: whitespace
// between tokens, keys in any order, any character escaped (\u00e9, \/),
// a whole number as 1.0 or 1e3 (as JavaScript, and so pi, reads it into
// an integer). The fast path (sessionline.go) reads them all; what is
// here is what it needs for that:
//
//   - wholeNumber: a number written any way that is a whole number, for
//     the fields rpi holds as integers, and plainWholeNumbers, which
//     writes those fields plainly before encoding/json reads a line the
//     fast path declined, so that both read 1.0 as 1;
//   - sameNumber: whether two numbers have one value, for a float the
//     decode reads (jsonIn.float): the fast path tells, as it decodes a
//     line, whether what it read is written again as the same JSON
//     value (jsonIn.lossy), so that the entry keeps no copy of its line
//     (keepLine): a session written another way costs the memory of one
//     written compactly, and no second look at its lines.

import (
	"bytes"
	"slices"
	"strconv"
)

// numberParts splits the valid JSON number n into its sign and its
// significant digits (no leading or trailing zeros; none for zero) into
// buf, and exp, so that n = digits × 10^exp. ok is false when the digits
// do not fit in buf or the exponent is out of int32's range.
func numberParts(n []byte, buf *[40]byte) (neg bool, digits []byte, exp int, ok bool) {
	i := 0
	if i < len(n) && n[i] == '-' {
		neg, i = true, 1
	}
	digits = buf[:0]
	for ; i < len(n) && n[i] >= '0' && n[i] <= '9'; i++ {
		if len(digits) > 0 || n[i] != '0' {
			if len(digits) == len(buf) {
				return neg, nil, 0, false
			}
			digits = append(digits, n[i])
		} else if len(digits) == 0 {
			continue
		}
	}
	if i < len(n) && n[i] == '.' {
		for i++; i < len(n) && n[i] >= '0' && n[i] <= '9'; i++ {
			exp--
			if len(digits) > 0 || n[i] != '0' {
				if len(digits) == len(buf) {
					return neg, nil, 0, false
				}
				digits = append(digits, n[i])
			}
		}
	}
	if i < len(n) && (n[i] == 'e' || n[i] == 'E') {
		e, err := strconv.ParseInt(string(n[i+1:]), 10, 32)
		if err != nil {
			return neg, nil, 0, false
		}
		exp += int(e)
	}
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits, exp = digits[:len(digits)-1], exp+1
	}
	if len(digits) == 0 {
		exp = 0
	}
	return neg, digits, exp, true
}

// wholeNumber is the value of the valid JSON number n when it is a whole
// number of at most 18 digits, however it is written (7, 7.0, 0.7e1,
// 700e-2).
func wholeNumber(n []byte) (int64, bool) {
	var buf [40]byte
	neg, digits, exp, ok := numberParts(n, &buf)
	if !ok || exp < 0 || len(digits)+exp > 18 {
		return 0, false
	}
	var v int64
	for _, c := range digits {
		v = v*10 + int64(c-'0')
	}
	for range exp {
		v *= 10
	}
	if neg {
		v = -v
	}
	return v, true
}

// sameNumber reports whether the valid JSON numbers a and b have one
// value (-0 is 0, as float64's == has it).
func sameNumber(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var bufA, bufB [40]byte
	negA, digitsA, expA, okA := numberParts(a, &bufA)
	negB, digitsB, expB, okB := numberParts(b, &bufB)
	return okA && okB && bytes.Equal(digitsA, digitsB) && expA == expB && (negA == negB || len(digitsA) == 0)
}

// Integer fields, by the object they are members of.
var (
	headerInts  = []string{"version"}
	entryInts   = []string{"tokensBefore"}
	messageInts = []string{"timestamp", "exitCode", "tokensBefore", "durationMs"}
	usageInts   = []string{"input", "output", "cacheRead", "cacheWrite", "totalTokens"}
)

// plainWholeNumbers returns the object raw with each member named by ints
// (exactly) whose value is a whole number written otherwise than plainly
// (1.0, 1e3) written plainly, and so inside a member "usage" with
// usageInts when nested; raw itself when there is none, or raw is not an
// object the fast path's scanner reads. encoding/json then reads into an
// integer what the fast path does.
func plainWholeNumbers(raw []byte, ints []string, nested bool) []byte {
	var d jsonIn
	d.reset(raw)
	var out []byte
	last := 0
	d.object(func(key []byte) {
		start := d.i
		d.skip()
		value, plain := raw[start:d.i], []byte(nil)
		switch {
		case nested && string(key) == "usage" && len(value) > 0 && value[0] == '{':
			if again := plainWholeNumbers(value, usageInts, false); &again[0] != &value[0] {
				plain = again
			}
		case slices.Contains(ints, string(key)) && len(value) > 0 && (value[0] == '-' || value[0] >= '0' && value[0] <= '9') &&
			bytes.ContainsAny(value, ".eE"):
			if v, ok := wholeNumber(value); ok {
				plain = strconv.AppendInt(nil, v, 10)
			}
		}
		if plain != nil {
			out = append(append(out, raw[last:start]...), plain...)
			last = d.i
		}
	})
	if d.fail || out == nil {
		return raw
	}
	return append(out, raw[last:]...)
}
