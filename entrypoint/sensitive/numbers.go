package sensitive

import (
	"slices"
	"strings"
	"time"
)

// A run is a maximal sequence of ASCII digits, s[start:end]: the characters
// either side (if any) are not digits. Numbers are only ever recognised as
// whole runs, or as whole groups of a formatted number (4111-1111-...), so
// an identity number is found in run-110101199003074514-x but no
// 18-digit window of a longer number counts.
type run struct{ start, end int }

// runs returns the maximal digit runs of s, except those inside a hash.
func runs(s string) []run {
	var rs []run
	wordEnd, hash := -1, false // the word holding the last run, and whether it is a hash
	for i := 0; i < len(s); {
		if !isDigit(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if i >= wordEnd {
			wordEnd, hash = hashWord(s, i)
		}
		if !hash {
			rs = append(rs, run{i, j})
		}
		i = j
	}
	return rs
}

// minHashLen is the shortest word taken for a hash: an MD5 or a UUID
// without dashes; git SHA-1s and SHA-256s are longer.
const minHashLen = 32

// hashWord finds the word (letters and digits) around s[i] and reports
// where it ends and whether it is a hash: at least minHashLen hexadecimal
// characters with at least one letter, such as a git commit id. Digit runs
// inside a hash are not numbers: about 1 SHA-1 in 3,000 would otherwise
// hold a run that passes a card or identity check.
func hashWord(s string, i int) (end int, hash bool) {
	start := i
	for start > 0 && isAlnum(s[start-1]) {
		start--
	}
	end = i
	hex, letter := true, false
	for end < len(s) && isAlnum(s[end]) {
		end++
	}
	for k := start; k < end; k++ {
		switch c := s[k] | 0x20; {
		case isDigit(s[k]):
		case c >= 'a' && c <= 'f':
			letter = true
		default:
			hex = false
		}
	}
	return end, hex && letter && end-start >= minHashLen
}

func isAlnum(c byte) bool {
	return isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'z'
}

// chains groups consecutive runs joined by one and the same separator
// (' ', or any of the name rule's '-', '_' and '.'), as in
// "4111 1111 1111 1111", "110101-19900307-4514" or "4111_1111_1111_1111":
// a label value cannot hold a space, so every separator the name rule
// allows must count alike, or the check is dodged by picking another.
// Every group must be a whole word, no letter or digit touching it but
// through the separator, so the digit groups of a UUID
// (…-4494-8932-88507eb69667) never make a chain with the word around them.
func chains(s string, rs []run) [][]run {
	var out [][]run
	for i := 0; i < len(rs); {
		if !wholeWord(s, rs[i]) {
			i++
			continue
		}
		j := i + 1
		var sep byte
		for j < len(rs) && rs[j].start == rs[j-1].end+1 && wholeWord(s, rs[j]) {
			c := s[rs[j-1].end]
			if !isGroupSep(c) || sep != 0 && c != sep {
				break
			}
			sep = c
			j++
		}
		if j-i > 1 {
			out = append(out, rs[i:j])
		}
		i = j
	}
	return out
}

func isGroupSep(c byte) bool { return c == ' ' || c == '-' || c == '_' || c == '.' }

// wholeWord reports whether no ASCII letter or digit touches run r, but
// for the X that may end an identity number.
func wholeWord(s string, r run) bool {
	end := r.end
	if end < len(s) && s[end]|0x20 == 'x' {
		end++
	}
	return (r.start == 0 || !isAlnum(s[r.start-1])) && (end == len(s) || !isAlnum(s[end]))
}

// --- PRC resident identity numbers (GB 11643-1999) ---

// provinces are the first two digits of a valid administrative division
// code (GB/T 2260): the provinces, autonomous regions and municipalities,
// Taiwan (71), and Hong Kong, Macao and Taiwan residents' residence permits
// (81, 82, 83).
var provinces = map[string]bool{
	"11": true, "12": true, "13": true, "14": true, "15": true,
	"21": true, "22": true, "23": true,
	"31": true, "32": true, "33": true, "34": true, "35": true, "36": true, "37": true,
	"41": true, "42": true, "43": true, "44": true, "45": true, "46": true,
	"50": true, "51": true, "52": true, "53": true, "54": true,
	"61": true, "62": true, "63": true, "64": true, "65": true,
	"71": true, "81": true, "82": true, "83": true,
}

// idWeights are the GB 11643 weights 2^(17-i) mod 11 of the first 17 digits.
var idWeights = [17]int{7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2}

// idCheck maps the weighted sum mod 11 to the check character.
const idCheck = "10X98765432"

func hasIdentityNumber(s string) bool {
	rs := runs(s)
	for _, r := range rs {
		n := r.end - r.start
		switch {
		case n == 18 && validID18(s[r.start:r.end]):
			return true
		case n == 17 && r.end < len(s) && (s[r.end] == 'X' || s[r.end] == 'x') &&
			validID18(s[r.start:r.end]+"X"):
			return true
		case n == 15 && validID15(s[r.start:r.end]):
			return true
		}
	}
	// The printed form 6-8-4 ("110101 19900307 4514"), with an X possibly
	// ending the last group.
	for _, c := range chains(s, rs) {
		for i := 0; i+2 < len(c); i++ {
			a, b, d := c[i], c[i+1], c[i+2]
			if a.end-a.start != 6 || b.end-b.start != 8 {
				continue
			}
			head := s[a.start:a.end] + s[b.start:b.end] + s[d.start:d.end]
			switch d.end - d.start {
			case 4:
				if validID18(head) {
					return true
				}
			case 3:
				if d.end < len(s) && (s[d.end] == 'X' || s[d.end] == 'x') && validID18(head+"X") {
					return true
				}
			}
		}
	}
	return false
}

// validID18 checks an 18-character identity number: 17 digits and a digit
// or X, a valid province, a real birth date from 1900 to this year, and the
// MOD 11-2 check character.
func validID18(id string) bool {
	if len(id) != 18 || !provinces[id[:2]] {
		return false
	}
	if !validDate(atoi(id[6:10]), atoi(id[10:12]), atoi(id[12:14])) {
		return false
	}
	sum := 0
	for i := 0; i < 17; i++ {
		sum += int(id[i]-'0') * idWeights[i]
	}
	return id[17] == idCheck[sum%11]
}

// validID15 checks the 15-digit form (issued until 1999): a valid province
// and a real birth date 19YYMMDD. It has no check digit.
func validID15(id string) bool {
	return len(id) == 15 && provinces[id[:2]] &&
		validDate(1900+atoi(id[6:8]), atoi(id[8:10]), atoi(id[10:12]))
}

// validDate reports whether y-m-d is a real calendar date from 1900 to the
// end of this year.
func validDate(y, m, d int) bool {
	if y < 1900 || y > time.Now().Year() || m < 1 || m > 12 || d < 1 {
		return false
	}
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	return t.Day() == d && int(t.Month()) == m
}

func atoi(digits string) int {
	n := 0
	for i := 0; i < len(digits); i++ {
		n = n*10 + int(digits[i]-'0')
	}
	return n
}

// --- payment cards ---

// network is a card network: its issuer identification ranges, each "lo"
// or "lo-hi" (a number's first len(lo) digits within [lo, hi]), and the
// lengths of its card numbers.
type network struct {
	ranges  []string
	lengths []int
}

// networks are the issuer identification ranges of the card networks in
// use (ISO/IEC 7812; the networks' published tables). A number counts as a
// card only with one of these prefixes at one of its lengths; with a
// valid Luhn digit besides, about 3 random 16-digit numbers in 100 do
// (the measured rates per length are in docs/security.md).
var networks = []network{
	{[]string{"4"}, []int{13, 16, 19}},                   // Visa
	{[]string{"51-55", "2221-2720"}, []int{16}},          // Mastercard, its 2-series
	{[]string{"34", "37"}, []int{15}},                    // American Express
	{[]string{"6011", "644-649", "65"}, lengths(16, 19)}, // Discover
	{[]string{"62"}, lengths(16, 19)},                    // UnionPay
	{[]string{"3528-3589"}, lengths(16, 19)},             // JCB
	{[]string{"300-305", "3095"}, []int{14, 16}},         // Diners Club (Carte Blanche 14, International 16)
	{[]string{"36", "38-39"}, lengths(14, 19)},           // Diners Club
	// Maestro:
	{[]string{"5018", "5020", "5038", "5893", "6304", "6759", "6761-6763"}, lengths(13, 19)},
}

// lengths are the card lengths from lo to hi.
func lengths(lo, hi int) []int {
	var out []int
	for n := lo; n <= hi; n++ {
		out = append(out, n)
	}
	return out
}

func (nw network) matches(num string) bool {
	if !slices.Contains(nw.lengths, len(num)) {
		return false
	}
	for _, r := range nw.ranges {
		lo, hi, ok := strings.Cut(r, "-")
		if !ok {
			hi = lo
		}
		if len(num) >= len(lo) && num[:len(lo)] >= lo && num[:len(lo)] <= hi {
			return true
		}
	}
	return false
}

func hasCardNumber(s string) bool {
	rs := runs(s)
	for _, r := range rs {
		if validCard(s[r.start:r.end]) {
			return true
		}
	}
	// Printed forms: 4-4-4-4, 4-6-5, 4-4-4-4-3, ...: a first group of four
	// digits, then groups of three to six.
	for _, c := range chains(s, rs) {
		for i := range c {
			if c[i].end-c[i].start != 4 {
				continue
			}
			num := s[c[i].start:c[i].end]
			for j := i + 1; j < len(c); j++ {
				n := c[j].end - c[j].start
				if n < 3 || n > 6 || len(num)+n > 19 {
					break
				}
				num += s[c[j].start:c[j].end]
				if validCard(num) {
					return true
				}
			}
		}
	}
	return false
}

// validCard reports whether num (all digits) has a card network's prefix
// and length and a valid Luhn check digit.
func validCard(num string) bool {
	if len(num) < 13 || len(num) > 19 {
		return false
	}
	for _, nw := range networks {
		if nw.matches(num) {
			return luhn(num)
		}
	}
	return false
}

// luhn reports whether num's last digit is its Luhn check digit.
func luhn(num string) bool {
	sum := 0
	double := false
	for i := len(num) - 1; i >= 0; i-- {
		d := int(num[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}
