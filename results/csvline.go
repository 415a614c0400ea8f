package results

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// csvLines builds a CSV file record by record, byte for byte as
// encoding/csv's Writer writes it with its defaults (comma, "\n"): fields
// separated by commas, a field quoted (its quotes doubled) when the Writer
// would quote it, a record ended by "\n". Numbers, which the Writer never
// quotes, are appended without a string of their own
// (TestCSVLinesMatchEncodingCSV).
type csvLines struct {
	b []byte
	n int // fields of the record so far
}

func (l *csvLines) sep() {
	if l.n > 0 {
		l.b = append(l.b, ',')
	}
	l.n++
}

// str appends a field.
func (l *csvLines) str(s string) {
	l.sep()
	if !csvNeedsQuotes(s) {
		l.b = append(l.b, s...)
		return
	}
	l.b = append(l.b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			l.b = append(l.b, '"')
		}
		l.b = append(l.b, s[i])
	}
	l.b = append(l.b, '"')
}

// strs appends a field per string.
func (l *csvLines) strs(s ...string) {
	for _, f := range s {
		l.str(f)
	}
}

// int appends n as strconv.Itoa writes it.
func (l *csvLines) int(n int) {
	l.sep()
	l.b = strconv.AppendInt(l.b, int64(n), 10)
}

// fixed appends f as strconv.FormatFloat(f, 'f', prec, 64) writes it.
func (l *csvLines) fixed(f float64, prec int) {
	l.sep()
	if prec == 3 {
		l.b = appendFixed3(l.b, f)
		return
	}
	l.b = strconv.AppendFloat(l.b, f, 'f', prec, 64)
}

// shortest appends f as strconv.FormatFloat(f, 'f', -1, 64) writes it.
func (l *csvLines) shortest(f float64) {
	l.sep()
	l.b = appendShortest(l.b, f)
}

// end ends the record.
func (l *csvLines) end() {
	l.b = append(l.b, '\n')
	l.n = 0
}

// csvNeedsQuotes says whether encoding/csv's Writer quotes field (with a
// comma as its separator).
func csvNeedsQuotes(field string) bool {
	if field == "" {
		return false
	}
	if field == `\.` {
		return true
	}
	for i := 0; i < len(field); i++ {
		switch field[i] {
		case '\n', '\r', '"', ',':
			return true
		}
	}
	r, _ := utf8.DecodeRuneInString(field)
	return unicode.IsSpace(r)
}
