package results

import (
	"math"
	"strconv"
)

// The results' numbers are times and counts: whole numbers of seconds, or
// of microseconds once rounded (round, batsimNum). strconv's shortest and
// fixed forms search for their digits; for such numbers the digits are
// those of an integer, which the two functions below write directly. Each
// writes the bytes strconv writes, and falls back to strconv for any other
// number (TestNumbersMatchStrconv).

// millionthsBound bounds the numbers appendShortest writes itself: below
// 2^32 two float64s are less than a millionth apart, so the only decimal
// of at most 6 decimals that a whole number of millionths rounds to is
// itself, and none shorter rounds to it.
const millionthsBound = 1e9

// appendShortest appends f as strconv.AppendFloat(b, f, 'f', -1, 64) does.
func appendShortest(b []byte, f float64) []byte {
	if f == 0 && !math.Signbit(f) {
		return append(b, '0')
	}
	if f > -millionthsBound && f < millionthsBound {
		// n is f in millionths when f is a whole number of them: the
		// nearest float64 to n / 10^6 is then f.
		if n := int64(math.Round(f * 1e6)); n != 0 && float64(n)/1e6 == f {
			if n < 0 {
				b, n = append(b, '-'), -n
			}
			b = strconv.AppendInt(b, n/1e6, 10)
			frac := n % 1e6
			if frac == 0 {
				return b
			}
			var d [7]byte
			d[0] = '.'
			for i := 6; i > 0; i-- {
				d[i] = byte('0' + frac%10)
				frac /= 10
			}
			end := len(d)
			for d[end-1] == '0' {
				end--
			}
			return append(b, d[:end]...)
		}
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

// wholeBound bounds the numbers appendFixed3 writes itself: every integer
// below 2^53 is a float64.
const wholeBound = 1 << 53

// appendFixed3 appends f as strconv.AppendFloat(b, f, 'f', 3, 64) does.
func appendFixed3(b []byte, f float64) []byte {
	if f > -wholeBound && f < wholeBound && f == math.Trunc(f) && (f != 0 || !math.Signbit(f)) {
		return append(strconv.AppendInt(b, int64(f), 10), '.', '0', '0', '0')
	}
	return strconv.AppendFloat(b, f, 'f', 3, 64)
}
