package swf

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// good is a valid job line; withField replaces one of its fields.
const good = "1 0 10 100 4 -1 -1 4 200 -1 1 1 1 -1 -1 -1 -1 -1"

func withField(k int, v string) string {
	f := strings.Fields(good)
	f[k-1] = v
	return strings.Join(f, " ")
}

// malformedHeader is two header lines; the bad job line of a case is line 4
// (after a valid job on line 3).
const malformedHeader = "; Version: 2.2\n; MaxProcs: 8\n" + good + "\n"

type malformedCase struct {
	name    string
	content string // whole file
	line    int
	field   int
	errName string
	is      error
	msg     string // the whole message, when the case pins it
}

func malformedCases() []malformedCase {
	return []malformedCase{
		{name: "short line 17 fields", content: malformedHeader + strings.Join(strings.Fields(good)[:17], " ") + "\n",
			line: 4, field: 18, errName: "think time", is: ErrFieldCount,
			msg: "t.swf:4: field 18 (think time): missing: the line has 17 fields, SWF has 18: wrong number of fields"},
		{name: "short line 3 fields", content: malformedHeader + "1 2 3\n", line: 4, field: 4, errName: "run time", is: ErrFieldCount},
		{name: "short last line without newline", content: malformedHeader + "7 8", line: 4, field: 3, errName: "wait time", is: ErrFieldCount},
		{name: "more than 18 fields", content: malformedHeader + good + " 19\n", line: 4, field: 19, errName: "extra field", is: ErrFieldCount,
			msg: `t.swf:4: field 19 (extra field): "19": the line has more than 18 fields: wrong number of fields`},
		{name: "non-number", content: malformedHeader + withField(5, "abc") + "\n", line: 4, field: 5, errName: "allocated processors", is: ErrNotNumber,
			msg: `t.swf:4: field 5 (allocated processors): "abc" is not a number`},
		{name: "non-number in a time", content: malformedHeader + withField(4, "1.2.3") + "\n", line: 4, field: 4, errName: "run time", is: ErrNotNumber},
		{name: "hex", content: malformedHeader + withField(2, "0x10") + "\n", line: 4, field: 2, errName: "submit time", is: ErrNotNumber},
		{name: "NaN", content: malformedHeader + withField(9, "NaN") + "\n", line: 4, field: 9, errName: "requested time", is: ErrNotNumber},
		{name: "Inf", content: malformedHeader + withField(3, "Inf") + "\n", line: 4, field: 3, errName: "wait time", is: ErrNotNumber},
		{name: "underscore", content: malformedHeader + withField(1, "1_000") + "\n", line: 4, field: 1, errName: "job number", is: ErrNotNumber},
		{name: "fractional processors", content: malformedHeader + withField(8, "2.5") + "\n", line: 4, field: 8, errName: "requested processors", is: ErrNotInteger},
		{name: "negative allocated processors", content: malformedHeader + withField(5, "-4") + "\n", line: 4, field: 5, errName: "allocated processors", is: ErrNegative,
			msg: `t.swf:4: field 5 (allocated processors): "-4" is negative and not -1 (unknown)`},
		{name: "negative requested processors", content: malformedHeader + withField(8, "-2") + "\n", line: 4, field: 8, errName: "requested processors", is: ErrNegative},
		{name: "negative submit time", content: malformedHeader + withField(2, "-5") + "\n", line: 4, field: 2, errName: "submit time", is: ErrNegative},
		{name: "negative fractional submit time", content: malformedHeader + withField(2, "-1.5") + "\n", line: 4, field: 2, errName: "submit time", is: ErrNegative},
		{name: "negative submit time above -1", content: malformedHeader + withField(2, "-0.5") + "\n", line: 4, field: 2, errName: "submit time", is: ErrNegative},
		{name: "time out of range", content: malformedHeader + withField(4, "1e300") + "\n", line: 4, field: 4, errName: "run time", is: ErrOutOfRange},
		{name: "float overflow", content: malformedHeader + withField(7, "1e400") + "\n", line: 4, field: 7, errName: "used memory", is: ErrOutOfRange},
		{name: "integer out of range", content: malformedHeader + withField(12, "1e20") + "\n", line: 4, field: 12, errName: "user id", is: ErrOutOfRange},
		{name: "bad first job line", content: "; MaxProcs: 8\n\n" + withField(11, "x") + "\n", line: 3, field: 11, errName: "status", is: ErrNotNumber},
		{name: "header MaxProcs not a number", content: "; Version: 2.2\n; MaxProcs: many\n" + good + "\n", line: 2, field: 0, errName: "header MaxProcs", is: nil,
			msg: `t.swf:2: header MaxProcs: "many" is not a non-negative integer: strconv.ParseInt: parsing "many": invalid syntax`},
		{name: "header UnixStartTime negative", content: "; UnixStartTime: -3\n", line: 1, field: 0, errName: "header UnixStartTime", is: ErrNegative},
		{name: "line too long", content: malformedHeader + strings.Repeat("1 ", MaxLineBytes) + "\n", line: 4, field: 0, errName: "line", is: ErrLineTooLong},
	}
}

func TestMalformed(t *testing.T) {
	for _, c := range malformedCases() {
		t.Run(c.name, func(t *testing.T) {
			for _, compress := range []bool{false, true} {
				data := []byte(c.content)
				if compress {
					data = gzipBytes(t, data)
				}
				_, _, _, err := ReadAll(bytes.NewReader(data), "t.swf", Options{})
				checkParseError(t, err, "t.swf", c.line, c.field, c.errName, c.is)
				if c.msg != "" && err.Error() != c.msg {
					t.Errorf("message:\n got %s\nwant %s", err, c.msg)
				}
			}
		})
	}
}

func checkParseError(t *testing.T, err error, file string, line, field int, name string, is error) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *ParseError", err, err)
	}
	if pe.File != file || pe.Line != line || pe.Field != field || pe.Name != name {
		t.Errorf("got file %q line %d field %d name %q, want %q %d %d %q (%v)", pe.File, pe.Line, pe.Field, pe.Name, file, line, field, name, err)
	}
	if is != nil && !errors.Is(err, is) {
		t.Errorf("error %v is not %v", err, is)
	}
}

// TestMalformedIsSticky: after an error, Next returns it again and keeps
// what was read before it.
func TestMalformedIsSticky(t *testing.T) {
	rd, err := NewReader(strings.NewReader(malformedHeader+withField(5, "abc")+"\n"+good+"\n"), "t.swf", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Next(); err != nil {
		t.Fatalf("first job: %v", err)
	}
	_, err1 := rd.Next()
	_, err2 := rd.Next()
	if err1 == nil || err1 != err2 {
		t.Fatalf("errors %v then %v, want the same non-nil error", err1, err2)
	}
	if s := rd.Stats(); s.Jobs != 1 || s.Kept != 1 || s.Lines != 4 {
		t.Errorf("stats %+v, want 1 job kept of 4 lines", s)
	}
}

func TestTruncatedGzip(t *testing.T) {
	data, err := os.ReadFile("testdata/ctc-sp2-first200.swf.gz")
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{len(data) / 2, len(data) - 4, len(data) - 1} {
		_, jobs, st, err := ReadAll(bytes.NewReader(data[:cut]), "ctc.swf.gz", Options{})
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("cut at %d: error %v is not a *ParseError", cut, err)
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) || pe.Name != "gzip" || pe.File != "ctc.swf.gz" || pe.Field != 0 {
			t.Errorf("cut at %d: %v (name %q), want a gzip unexpected EOF naming the file", cut, err, pe.Name)
		}
		// The error is at the line after the last complete one.
		if pe.Line != st.Lines+1 || len(jobs) != st.Kept {
			t.Errorf("cut at %d: error at line %d after %d lines, %d jobs of %d kept", cut, pe.Line, st.Lines, len(jobs), st.Kept)
		}
		if cut < len(data)-8 && st.Jobs >= 200 {
			t.Errorf("cut at %d: read all %d jobs from a truncated stream", cut, st.Jobs)
		}
	}
}

func TestCorruptGzip(t *testing.T) {
	data, err := os.ReadFile("testdata/ctc-sp2-first200.swf.gz")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("checksum", func(t *testing.T) {
		bad := append([]byte(nil), data...)
		bad[len(bad)-6] ^= 0xff // inside the CRC-32 of the trailer
		_, _, _, err := ReadAll(bytes.NewReader(bad), "c.gz", Options{})
		checkParseError(t, err, "c.gz", 230, 0, "gzip", gzip.ErrChecksum)
	})
	t.Run("header", func(t *testing.T) {
		_, err := NewReader(bytes.NewReader([]byte{0x1f, 0x8b, 0, 0}), "h.gz", Options{})
		checkParseError(t, err, "h.gz", 0, 0, "gzip", nil)
	})
}

func gzipBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
