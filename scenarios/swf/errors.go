package swf

import (
	"errors"
	"fmt"
	"strconv"
)

// Sentinel causes carried by ParseError.Err, for errors.Is.
var (
	// ErrFieldCount: a job line has fewer or more than 18 fields.
	ErrFieldCount = errors.New("wrong number of fields")
	// ErrNotNumber: a field is not a decimal number.
	ErrNotNumber = errors.New("not a number")
	// ErrNotInteger: a count or identifier field has a fractional part.
	ErrNotInteger = errors.New("not an integer")
	// ErrNegative: a submit time or processor count is negative and not -1.
	ErrNegative = errors.New("negative and not -1 (unknown)")
	// ErrOutOfRange: a number is too large to be represented.
	ErrOutOfRange = errors.New("out of range")
	// ErrLineTooLong: a line exceeds MaxLineBytes.
	ErrLineTooLong = errors.New("line too long")
)

// ParseError is a problem with one place of a trace. Field is the SWF field
// number (1 to 18; 19 for an extra field) and Name its SWF name; Field is 0
// when the problem is not one job field (a header value, a read or gzip
// error, an overlong line), and Name then says what was being read. Line is
// 1-based; 0 when the problem precedes the first line (a bad gzip header).
type ParseError struct {
	File  string
	Line  int
	Field int
	Name  string
	Err   error
}

// Error renders "file:line: field N (name): cause", for example
// `trace.swf:312: field 5 (allocated processors): "abc" is not a number`.
func (e *ParseError) Error() string {
	s := e.File
	if e.Line > 0 {
		s += ":" + strconv.Itoa(e.Line)
	}
	switch {
	case e.Field > 0 && e.Name != "":
		s += fmt.Sprintf(": field %d (%s)", e.Field, e.Name)
	case e.Field > 0:
		s += fmt.Sprintf(": field %d", e.Field)
	case e.Name != "":
		s += ": " + e.Name
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *ParseError) Unwrap() error { return e.Err }

// quote renders a token for an error message, cut to a readable length.
func quote(tok []byte) string {
	const max = 40
	if len(tok) > max {
		return strconv.Quote(string(tok[:max])) + "..."
	}
	return strconv.Quote(string(tok))
}
