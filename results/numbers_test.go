package results

import (
	"bytes"
	"encoding/csv"
	"math"
	"math/rand"
	"strconv"
	"testing"
)

// appendShortest and appendFixed3 write what strconv writes: whole numbers
// of seconds and millionths (which they write themselves), numbers on
// either side of their bounds and any other float64 (strconv's).
func TestNumbersMatchStrconv(t *testing.T) {
	vals := []float64{0, math.Copysign(0, -1), 1, -1, 1e-6, -1e-6, 5e-7, 1e-7, 0.1, 0.5, 0.999999, 1.000001, 164472, 659623.000001,
		999999999.999999, 1e9, -1e9, 1e9 - 1e-6, 4294967296.000001, 1 << 53, 1<<53 - 1, -(1 << 53), 1e21, 1e300, math.SmallestNonzeroFloat64,
		math.MaxFloat64, math.Inf(1), math.Inf(-1), math.NaN(), 0.1 + 0.2, 1.0 / 3}
	rng := rand.New(rand.NewSource(7))
	for range 20000 {
		n := rng.Int63n(2e15) - 1e15
		vals = append(vals,
			float64(n)/1e6,                    // a whole number of millionths, rounded as round does
			math.Round(float64(n)/1e3),        // a whole number of seconds
			float64(n)/1e3,                    // milliseconds
			float64(n)/1e6+1e-9*rng.Float64(), // almost a whole number of millionths
			(rng.Float64()-0.5)*math.Pow(10, float64(rng.Intn(40)-20)),
			math.Float64frombits(rng.Uint64()))
	}
	for _, f := range vals {
		if got, want := string(appendShortest(nil, f)), strconv.FormatFloat(f, 'f', -1, 64); got != want {
			t.Errorf("appendShortest(%v) = %s, strconv %s", f, got, want)
		}
		if got, want := string(appendFixed3([]byte("x"), f)), "x"+strconv.FormatFloat(f, 'f', 3, 64); got != want {
			t.Errorf("appendFixed3(%v) = %s, strconv %s", f, got, want)
		}
	}
}

// csvLines writes what encoding/csv's Writer writes: fields that need
// quoting or not, numbers, empty records.
func TestCSVLinesMatchEncodingCSV(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	fields := []string{"", " ", `\.`, `\..`, "a,b", `say "hi"`, "l1\nl2", "cr\r", "\t tab", "\u00a0nbsp", "\u2028x", "x ", "-1.000",
		"ctc:17", "request=local;components=ctc:17", "h\xffllo", "\xff"}
	alphabet := []byte("ab ,\"\r\n\t\\.\xc2\xa0\xff")
	for range 2000 {
		b := make([]byte, rng.Intn(6))
		for i := range b {
			b[i] = alphabet[rng.Intn(len(alphabet))]
		}
		fields = append(fields, string(b))
	}
	var want bytes.Buffer
	w := csv.NewWriter(&want)
	var l csvLines
	for i := 0; i < len(fields); i += 5 {
		rec := fields[i:min(i+5, len(fields))]
		n, f := rng.Intn(1000)-500, float64(rng.Intn(2e6)-1e6)/1e3
		if err := w.Write(append(append([]string(nil), rec...), strconv.Itoa(n), strconv.FormatFloat(f, 'f', 3, 64),
			strconv.FormatFloat(f, 'f', 4, 64), strconv.FormatFloat(f, 'f', -1, 64))); err != nil {
			t.Fatal(err)
		}
		l.strs(rec...)
		l.int(n)
		l.fixed(f, 3)
		l.fixed(f, 4)
		l.shortest(f)
		l.end()
	}
	w.Flush()
	if got := string(l.b); got != want.String() {
		t.Errorf("csvLines wrote\n%q\nencoding/csv\n%q", got, want.String())
	}
}
