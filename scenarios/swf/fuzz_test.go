package swf

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// FuzzRead reads arbitrary bytes (plain or gzip) with arbitrary options: it
// must never panic, every error must be a *ParseError naming the file, and a
// trace read without error must satisfy the Stats and Job invariants.
func FuzzRead(f *testing.F) {
	for _, path := range []string{kthExcerpt, ctcExcerpt} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint32(0), uint32(0), uint16(0), uint8(0))
		f.Add(data, uint32(7*86400), uint32(86400), uint16(32), uint8(5))
		if bytes.HasSuffix([]byte(path), []byte(".gz")) {
			f.Add(data[:len(data)/2], uint32(0), uint32(0), uint16(0), uint8(0))
		} else {
			// A short prefix (the header and a few jobs) that mutates fast.
			f.Add(data[:bytes.Index(data, []byte("\n   20 "))], uint32(0), uint32(0), uint16(0), uint8(0))
		}
	}
	for _, c := range malformedCases() {
		if len(c.content) > MaxLineBytes {
			continue // the overlong line: too big to mutate usefully
		}
		f.Add([]byte(c.content), uint32(0), uint32(0), uint16(0), uint8(0))
	}
	f.Add([]byte("; MaxProcs: 8\n"+good+"\n"+strings.Replace(good, " 1 1 1 ", " 5 1 1 ", 1)+"\n"), uint32(0), uint32(50), uint16(2), uint8(1))

	f.Fuzz(func(t *testing.T, data []byte, start, length uint32, maxProcs uint16, limit uint8) {
		opts := Options{Start: time.Duration(start) * time.Second, Length: time.Duration(length) * time.Second,
			MaxProcs: int(maxProcs), Limit: int(limit)}
		_, jobs, st, err := ReadAll(bytes.NewReader(data), "fuzz.swf", opts)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			if pe.File != "fuzz.swf" || pe.Err == nil || !strings.HasPrefix(err.Error(), "fuzz.swf") || pe.Line < 0 ||
				pe.Field < 0 || pe.Field > NumFields+1 || (pe.Field >= 1 && pe.Field <= NumFields && pe.Name != FieldNames[pe.Field-1]) {
				t.Fatalf("malformed ParseError %+v: %v", pe, err)
			}
			return
		}
		if st.Jobs != st.Kept+st.SkippedTotal() || st.Kept != len(jobs) || (opts.Limit > 0 && st.Kept > opts.Limit) {
			t.Fatalf("stats do not add up: %+v, %d jobs, limit %d", st, len(jobs), opts.Limit)
		}
		prev := 0
		for _, j := range jobs {
			if j.Procs <= 0 || j.Runtime <= 0 || j.Walltime <= 0 || j.Submit < 0 ||
				(opts.Length > 0 && j.Submit >= opts.Length) || (opts.MaxProcs > 0 && j.Procs > opts.MaxProcs) ||
				j.Line <= prev || j.Line > st.Lines {
				t.Fatalf("job breaks an invariant (options %+v, %d lines): %+v", opts, st.Lines, j)
			}
			prev = j.Line
		}
	})
}
