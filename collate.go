package main

// ls's order, pi 1.6's: names lower-cased and compared as Node's
// localeCompare compares them (ICU's root collation, en-US), which is not
// byte order: white space first, then punctuation and symbols in ICU's
// order (_ before - before . before ~), then digits, then letters; an
// accent counts only where the letters of two names tie (e < é < eb).
// Exact for ASCII names, the data below being ICU's order of them; other
// characters are placed as ICU places them roughly: a letter with marks
// by its letter (its compatibility decomposition, nfkcData), other
// letters after z, other symbols among the symbols.

import (
	"slices"
	"strings"
	"unicode"
)

// icuASCIIOrder is ICU's root order of the ASCII characters that are not
// ignorable, upper-case letters aside (names are compared lower-cased).
const icuASCIIOrder = "\t\n\v\f\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz"

// Primary weights: ASCII white space, punctuation and symbols, then the
// others of those, then digits and ASCII letters (even weights, the odd
// ones after them being icuLatinLetter's), then other letters.
const (
	otherSymbolWeight = 1 << 8
	digitWeight       = 1 << 22
	otherLetterWeight = 1 << 23
)

// markWeight is the secondary weight above every combining mark's, of
// the letters ICU sorts as an ASCII letter with a mark of its own.
const markWeight = 0x110000

// icuLatinLetter is how ICU sorts a Latin letter without a
// decomposition by ASCII letters (base "" for another rune): as letters
// with a mark weighing more than an accent (ø is o, after ó), as two
// letters so marked (æ is ae, after aé), or, secondary 0, as a letter of
// its own right after one (ı after i, þ after z).
func icuLatinLetter(r rune) (base string, secondary int32) {
	switch r {
	case 'æ':
		return "ae", markWeight
	case 'œ':
		return "oe", markWeight
	case 'ß':
		return "ss", markWeight
	case 'ø':
		return "o", markWeight
	case 'ł':
		return "l", markWeight
	case 'đ':
		return "d", markWeight
	case 'ð':
		return "d", markWeight + 1
	case 'ħ':
		return "h", markWeight
	case 'ı':
		return "i", 0
	case 'ŋ':
		return "n", 0
	case 'ŧ':
		return "t", 0
	case 'ƒ':
		return "f", 0
	case 'þ':
		return "z", 0
	}
	return "", 0
}

// asciiWeight is an ASCII character's primary weight, 0 for one ICU
// ignores (a control).
func asciiWeight(x rune) int32 {
	i := strings.IndexRune(icuASCIIOrder, x)
	switch {
	case i < 0:
		return 0
	case '0' <= x && x <= '9' || 'a' <= x && x <= 'z':
		return digitWeight + 2*int32(i)
	}
	return 1 + int32(i)
}

// collationKey is a name's ICU-like key: its primary weights, and a
// secondary weight for each (1 for a plain character, more for the marks
// on it).
type collationKey struct {
	primary, secondary []int32
}

func collationKeyOf(name string) collationKey {
	var k collationKey
	decomp := nfkcData.get().decomp
	for _, r := range strings.ToLower(name) {
		runes := []rune{r}
		if d, ok := decomp[r]; ok {
			runes = d
		}
		for _, x := range runes {
			latinBase, secondary := icuLatinLetter(x)
			switch {
			case unicode.Is(unicode.Mn, x) || unicode.Is(unicode.Me, x):
				k.secondary = append(k.secondary, 2+x) // a mark weighs on the character before it
			case unicode.IsDigit(x):
				k.primary, k.secondary = append(k.primary, asciiWeight('0'+digitValue(x))), append(k.secondary, 1)
			case x < 0x80:
				if w := asciiWeight(x); w > 0 { // controls are ignorable
					k.primary, k.secondary = append(k.primary, w), append(k.secondary, 1)
				}
			case latinBase != "":
				if secondary == 0 {
					k.primary, k.secondary = append(k.primary, asciiWeight(rune(latinBase[0]))+1), append(k.secondary, 1)
					break
				}
				for i, b := range latinBase {
					k.primary, k.secondary = append(k.primary, asciiWeight(b)), append(k.secondary, 1)
					if i == 0 {
						k.secondary = append(k.secondary, secondary) // as a mark on the first
					}
				}
			case unicode.IsLetter(x) || unicode.IsNumber(x):
				k.primary, k.secondary = append(k.primary, otherLetterWeight+x), append(k.secondary, 1)
			case unicode.IsControl(x) || unicode.Is(unicode.Cf, x):
				// ignorable, as ICU has them
			default:
				k.primary, k.secondary = append(k.primary, otherSymbolWeight+x), append(k.secondary, 1)
			}
		}
	}
	return k
}

// sortAsPi sorts items by their names in pi's ls order; names that tie
// keep their order (os.ReadDir's, bytes, as Node's readdir gives them).
func sortAsPi[T any](items []T, name func(T) string) {
	type keyed struct {
		item T
		key  collationKey
	}
	all := make([]keyed, len(items))
	for i, it := range items {
		all[i] = keyed{it, collationKeyOf(name(it))}
	}
	slices.SortStableFunc(all, func(a, b keyed) int {
		if c := slices.Compare(a.key.primary, b.key.primary); c != 0 {
			return c
		}
		return slices.Compare(a.key.secondary, b.key.secondary)
	})
	for i, k := range all {
		items[i] = k.item
	}
}

// digitValue is the value of a decimal digit of any script: the digits
// of each come in a row of ten, from zero.
func digitValue(r rune) rune {
	v := rune(0)
	for unicode.IsDigit(r-v-1) && v < 9 {
		v++
	}
	return v
}
