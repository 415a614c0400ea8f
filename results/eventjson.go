package results

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/koala-emu/koala-emu/actors/msg"
)

// eventEncoder writes an event as the JSON object eventJSON makes of it,
// byte for byte what json.Marshal(eventJSON(ev)) writes (keys sorted, a
// field's value replaced by a value of the same key, floats as
// encoding/json formats them, strings escaped as it escapes them), without
// building the map or reflecting over it. Its scratch slice is reused from
// event to event; it is not safe for concurrent use (the recorder's lock
// guards it).
type eventEncoder struct {
	kvs []eventKV
	idx []int // kvs's indices in key order
}

// eventKV is one member of the object: a string, or a number when num.
type eventKV struct {
	key string
	str string
	num float64
	isN bool
}

// appendEvent appends ev's JSON object to b. It returns false, and b
// unchanged in meaning, when a number is not finite: JSON cannot hold it
// and json.Marshal's error is the one to report.
func (e *eventEncoder) appendEvent(b []byte, ev *msg.Event) ([]byte, bool) {
	kvs := e.kvs[:0]
	kvs = append(kvs, eventKV{key: "t_s", num: round(ev.TS), isN: true},
		eventKV{key: "wall_s", num: round(ev.WallS), isN: true},
		eventKV{key: "kind", str: ev.Kind})
	if ev.JobId != "" {
		kvs = append(kvs, eventKV{key: "job", str: ev.JobId})
	}
	if ev.Source != "" {
		kvs = append(kvs, eventKV{key: "source", str: ev.Source})
	}
	for k, v := range ev.Fields {
		kvs = append(kvs, eventKV{key: k, str: v})
	}
	for k, v := range ev.Values {
		kvs = append(kvs, eventKV{key: k, num: round(v), isN: true})
	}
	// Insertion sort by key, stable, of the members' indices (moving the
	// members themselves would write their strings through the collector's
	// barrier): of equal keys the last one set wins, as in the map (a value
	// over a field, a field over a fixed member).
	e.kvs = kvs
	idx := e.idx[:0]
	for i := range kvs {
		idx = append(idx, i)
	}
	for i := 1; i < len(idx); i++ {
		for j := i; j > 0 && keyLess(kvs[idx[j]].key, kvs[idx[j-1]].key); j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	e.idx = idx
	b = append(b, '{')
	n := 0
	for i, k := range idx {
		kv := &kvs[k]
		if i+1 < len(idx) && kvs[idx[i+1]].key == kv.key {
			continue // overwritten by a later member of the same key
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendJSONString(b, kv.key)
		b = append(b, ':')
		if !kv.isN {
			b = appendJSONString(b, kv.str)
			continue
		}
		if math.IsInf(kv.num, 0) || math.IsNaN(kv.num) {
			return b, false
		}
		b = appendJSONFloat(b, kv.num)
	}
	return append(b, '}'), true
}

// keyLess is a < b, told by the first bytes when they differ (the keys of
// an event mostly begin differently) without a call to compare the strings.
func keyLess(a, b string) bool {
	if len(a) > 0 && len(b) > 0 && a[0] != b[0] {
		return a[0] < b[0]
	}
	return a < b
}

// appendJSONFloat formats f as encoding/json does a float64: like %g with
// ES6's exponent cutoffs and no exponent padding.
func appendJSONFloat(b []byte, f float64) []byte {
	if abs := math.Abs(f); abs == 0 || (abs >= 1e-6 && abs < 1e21) {
		return appendShortest(b, f)
	}
	b = strconv.AppendFloat(b, f, 'e', -1, 64)
	// e-09 to e-9
	n := len(b)
	if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b
}

const hexDigits = "0123456789abcdef"

// jsonPlain says which bytes appendJSONString writes as they are: ASCII
// from the space on but for the quote, the backslash and <, > and &.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONString quotes s as encoding/json does (HTML-safe: <, > and &
// escaped; invalid UTF-8 as U+FFFD; U+2028 and U+2029 escaped).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	// The bytes written as they are, by a table: most strings are all of them.
	i := 0
	for i < len(s) && jsonPlain[s[i]] {
		i++
	}
	if i == len(s) {
		b = append(b, s...)
		return append(b, '"')
	}
	start := 0
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonPlain[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
