package swf

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// MaxLineBytes is the longest line the reader accepts (a job line is about
// 100 bytes); a longer line is a ParseError.
const MaxLineBytes = 64 << 10

// maxSeconds bounds the time fields (about 126 years), so that every time
// converts to a time.Duration without overflow.
const maxSeconds = 4e9

// maxInteger bounds the count and identifier fields: every integer up to it
// is exact in a float64.
const maxInteger = 1 << 53

// field kinds: how a token is checked.
const (
	kindInt    = iota // integer (a fractional part is an error)
	kindTime          // seconds, bounded by maxSeconds
	kindAmount        // any finite number
)

// fieldKind is the kind of fields 1 to 18; strict marks the fields where a
// negative value other than -1 is an error (submit time, processor counts).
var fieldKind = [NumFields]struct {
	kind   int
	strict bool
}{
	{kindInt, false},    // 1 job number
	{kindTime, true},    // 2 submit time
	{kindTime, false},   // 3 wait time
	{kindTime, false},   // 4 run time
	{kindInt, true},     // 5 allocated processors
	{kindTime, false},   // 6 average CPU time
	{kindAmount, false}, // 7 used memory
	{kindInt, true},     // 8 requested processors
	{kindTime, false},   // 9 requested time
	{kindAmount, false}, // 10 requested memory
	{kindInt, false},    // 11 status
	{kindInt, false},    // 12 user id
	{kindInt, false},    // 13 group id
	{kindInt, false},    // 14 executable number
	{kindInt, false},    // 15 queue number
	{kindInt, false},    // 16 partition number
	{kindInt, false},    // 17 preceding job
	{kindTime, false},   // 18 think time
}

// Reader streams the jobs of one trace. Make one with NewReader; call Next
// until it returns io.EOF or an error. A Reader is not safe for concurrent
// use.
type Reader struct {
	name    string
	opts    Options
	src     *bufio.Reader
	header  Header
	stats   Stats
	pending []byte // the first job line, read while reading the header
	err     error  // sticky: returned by every Next after the first
	gz      bool   // the source is a gzip stream
	lastKey string // header key a continuation line extends
	toks    [NumFields + 1][]byte
}

// NewReader reads the header of the trace in r (plain text, or gzip detected
// by its magic bytes) and returns a Reader positioned at the first job.
// name is the file name used in errors. Every error about the content is a
// *ParseError; an invalid Options is a plain error.
func NewReader(r io.Reader, name string, opts Options) (*Reader, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	rd := &Reader{
		name:   name,
		opts:   opts,
		header: Header{Fields: map[string][]string{}},
		stats:  Stats{Skipped: map[Reason]int{}},
	}
	br := bufio.NewReaderSize(r, MaxLineBytes)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &ParseError{File: name, Name: "gzip", Err: err}
		}
		br = bufio.NewReaderSize(zr, MaxLineBytes)
		rd.gz = true
	}
	rd.src = br
	if err := rd.readHeader(); err != nil {
		return nil, err
	}
	return rd, nil
}

// Header is the trace's header, complete once NewReader returned.
func (r *Reader) Header() Header { return r.header }

// Stats are the counts so far; final once Next returned io.EOF.
func (r *Reader) Stats() Stats {
	s := r.stats
	s.Skipped = make(map[Reason]int, len(r.stats.Skipped))
	for k, v := range r.stats.Skipped {
		s.Skipped[k] = v
	}
	return s
}

// line returns the next line without its end of line, or io.EOF. The slice
// is valid until the next call.
func (r *Reader) line() ([]byte, error) {
	b, err := r.src.ReadSlice('\n')
	switch {
	case err == nil, err == io.EOF && len(b) > 0:
		r.stats.Lines++
		b = bytes.TrimSuffix(b, []byte{'\n'})
		return bytes.TrimSuffix(b, []byte{'\r'}), nil
	case err == io.EOF:
		return nil, io.EOF
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, &ParseError{File: r.name, Line: r.stats.Lines + 1, Name: "line",
			Err: fmt.Errorf("longer than %d bytes: %w", MaxLineBytes, ErrLineTooLong)}
	default:
		// A read error (a truncated or corrupt gzip stream) wins over a
		// partial last line, which is not reported.
		name := "read"
		if r.gz {
			name = "gzip"
		}
		return nil, &ParseError{File: r.name, Line: r.stats.Lines + 1, Name: name, Err: err}
	}
}

func (r *Reader) readHeader() error {
	for {
		b, err := r.line()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		t := bytes.TrimLeft(b, " \t")
		if len(t) > 0 && t[0] != ';' {
			r.pending = append([]byte(nil), b...)
			return nil
		}
		r.header.Lines++
		if len(t) == 0 {
			continue
		}
		if err := r.headerLine(string(t[1:])); err != nil {
			return err
		}
	}
}

// headerLine takes one comment line without its ';'. A key line is
// "; Key: value" with at most one blank before the key, a key of letters,
// digits, '_' or '-', and a blank or the end of the line after the colon (so
// "; http://host" is no key); a line indented by two or more blanks
// continues the previous key; any other comment ends it.
func (r *Reader) headerLine(c string) error {
	indent := len(c) - len(strings.TrimLeft(c, " \t"))
	body := strings.TrimSpace(c)
	if indent <= 1 {
		if i := strings.IndexByte(body, ':'); i > 0 && isKey(body[:i]) && (i+1 == len(body) || body[i+1] == ' ' || body[i+1] == '\t') {
			key, val := body[:i], strings.TrimSpace(body[i+1:])
			r.header.Fields[key] = append(r.header.Fields[key], val)
			r.lastKey = key
			return r.namedValue(key, val)
		}
	}
	if indent >= 2 && r.lastKey != "" && body != "" {
		vs := r.header.Fields[r.lastKey]
		vs[len(vs)-1] += "\n" + body
		return nil
	}
	r.lastKey = ""
	return nil
}

func isKey(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return s != ""
}

// namedValue fills the Header's named fields from the first occurrence of
// their key.
func (r *Reader) namedValue(key, val string) error {
	if len(r.header.Fields[key]) > 1 {
		return nil
	}
	var dst *int
	var dst64 *int64
	switch key {
	case "TimeZoneString":
		r.header.TimeZoneString = val
		return nil
	case "MaxNodes":
		dst = &r.header.MaxNodes
	case "MaxProcs":
		dst = &r.header.MaxProcs
	case "MaxJobs":
		dst = &r.header.MaxJobs
	case "MaxRecords":
		dst = &r.header.MaxRecords
	case "UnixStartTime":
		dst64 = &r.header.UnixStartTime
	default:
		return nil
	}
	lead := val
	if f := strings.Fields(val); len(f) > 0 {
		lead = f[0]
	}
	n, err := strconv.ParseInt(lead, 10, 64)
	if err == nil && n < 0 {
		err = ErrNegative
	}
	if err == nil && dst != nil && n > maxInteger {
		err = ErrOutOfRange
	}
	if err != nil {
		return &ParseError{File: r.name, Line: r.stats.Lines, Name: "header " + key,
			Err: fmt.Errorf("%s is not a non-negative integer: %w", strconv.Quote(lead), err)}
	}
	if dst != nil {
		*dst = int(n)
	} else {
		*dst64 = n
	}
	return nil
}

// Next returns the next kept job, io.EOF at the end of the trace (or once
// Options.Limit jobs were kept), or the first error met, which every later
// call returns again.
func (r *Reader) Next() (Job, error) {
	for r.err == nil {
		var b []byte
		if r.pending != nil {
			b, r.pending = r.pending, nil
		} else {
			var err error
			if b, err = r.line(); err != nil {
				r.err = err
				break
			}
		}
		if t := bytes.TrimLeft(b, " \t\v\f"); len(t) == 0 || t[0] == ';' {
			continue // blank line or a comment after the header
		}
		rec, err := r.parse(b)
		if err != nil {
			r.err = err
			break
		}
		r.stats.Jobs++
		job, reason := r.classify(rec)
		if reason != "" {
			r.stats.Skipped[reason]++
			continue
		}
		r.stats.Kept++
		if job.Runtime > job.Walltime {
			r.stats.OverWalltime++
		}
		if r.opts.Limit > 0 && r.stats.Kept >= r.opts.Limit {
			r.stats.LimitReached = true
			r.err = io.EOF
		}
		return job, nil
	}
	return Job{}, r.err
}

// classify applies the skip rules in the order of the Reason constants and
// derives the replay values of a kept job.
func (r *Reader) classify(rec Record) (Job, Reason) {
	if rec.SubmitTime < 0 {
		return Job{}, ReasonNoSubmitTime
	}
	submit := seconds(rec.SubmitTime)
	switch {
	case submit < r.opts.Start:
		return Job{}, ReasonBeforeWindow
	case r.opts.Length > 0 && submit >= r.opts.Start+r.opts.Length:
		return Job{}, ReasonAfterWindow
	case rec.Status == StatusCancelled && (rec.RunTime <= 0 || rec.WaitTime == Unknown):
		return Job{}, ReasonCancelled
	case rec.AllocatedProcs <= 0 && rec.RequestedProcs <= 0:
		return Job{}, ReasonNoProcs
	case rec.RunTime <= 0:
		return Job{}, ReasonNoRuntime
	}
	procs := rec.AllocatedProcs
	if procs <= 0 {
		procs = rec.RequestedProcs
	}
	if r.opts.MaxProcs > 0 && procs > int64(r.opts.MaxProcs) {
		return Job{}, ReasonTooWide
	}
	run := seconds(rec.RunTime)
	wall := run
	if rec.RequestedTime > 0 {
		wall = seconds(rec.RequestedTime)
	}
	return Job{
		Record:   rec,
		Line:     r.stats.Lines,
		Submit:   submit - r.opts.Start,
		Procs:    int(procs),
		Runtime:  run,
		Walltime: wall,
	}, ""
}

func seconds(s float64) time.Duration {
	return time.Duration(math.Round(s * 1e9))
}

// parse splits a job line into its 18 fields and checks each.
func (r *Reader) parse(b []byte) (Record, error) {
	n := 0
	for i := 0; i < len(b); {
		for i < len(b) && isSpace(b[i]) {
			i++
		}
		if i == len(b) {
			break
		}
		j := i
		for j < len(b) && !isSpace(b[j]) {
			j++
		}
		if n == len(r.toks) {
			n++
			break
		}
		r.toks[n] = b[i:j]
		n++
		i = j
	}
	if n < NumFields {
		return Record{}, &ParseError{File: r.name, Line: r.stats.Lines, Field: n + 1, Name: FieldNames[n],
			Err: fmt.Errorf("missing: the line has %d fields, SWF has %d: %w", n, NumFields, ErrFieldCount)}
	}
	if n > NumFields {
		return Record{}, &ParseError{File: r.name, Line: r.stats.Lines, Field: NumFields + 1, Name: "extra field",
			Err: fmt.Errorf("%s: the line has more than %d fields: %w", quote(r.toks[NumFields]), NumFields, ErrFieldCount)}
	}
	var v [NumFields]float64
	for k := 0; k < NumFields; k++ {
		x, err := number(r.toks[k], fieldKind[k].kind, fieldKind[k].strict)
		if err != nil {
			return Record{}, &ParseError{File: r.name, Line: r.stats.Lines, Field: k + 1, Name: FieldNames[k], Err: err}
		}
		v[k] = x
	}
	return Record{
		JobNumber:       int64(v[0]),
		SubmitTime:      v[1],
		WaitTime:        v[2],
		RunTime:         v[3],
		AllocatedProcs:  int64(v[4]),
		AvgCPUTime:      v[5],
		UsedMemory:      v[6],
		RequestedProcs:  int64(v[7]),
		RequestedTime:   v[8],
		RequestedMemory: v[9],
		Status:          int64(v[10]),
		UserID:          int64(v[11]),
		GroupID:         int64(v[12]),
		Executable:      int64(v[13]),
		Queue:           int64(v[14]),
		Partition:       int64(v[15]),
		PrecedingJob:    int64(v[16]),
		ThinkTime:       v[17],
	}, nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

// number parses one field: a decimal number (no hex, no Inf or NaN, no
// underscores), an integer for kindInt, at most maxSeconds for kindTime, and
// -1 or non-negative when strict.
func number(tok []byte, kind int, strict bool) (float64, error) {
	var x float64
	if i, ok := smallInt(tok); ok {
		x = float64(i)
	} else {
		for _, c := range tok {
			if !(c >= '0' && c <= '9' || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E') {
				return 0, fmt.Errorf("%s is %w", quote(tok), ErrNotNumber)
			}
		}
		f, err := strconv.ParseFloat(string(tok), 64)
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("%s is %w", quote(tok), ErrOutOfRange)
		}
		if err != nil {
			return 0, fmt.Errorf("%s is %w", quote(tok), ErrNotNumber)
		}
		if kind == kindInt && f != math.Trunc(f) {
			return 0, fmt.Errorf("%s is %w", quote(tok), ErrNotInteger)
		}
		x = f
	}
	switch {
	case kind == kindInt && math.Abs(x) > maxInteger, kind == kindTime && math.Abs(x) > maxSeconds:
		return 0, fmt.Errorf("%s is %w", quote(tok), ErrOutOfRange)
	case strict && x < 0 && x != Unknown:
		return 0, fmt.Errorf("%s is %w", quote(tok), ErrNegative)
	}
	return x, nil
}

// smallInt parses an optional '-' and 1 to 15 digits without allocating.
func smallInt(tok []byte) (int64, bool) {
	neg := len(tok) > 0 && tok[0] == '-'
	d := tok
	if neg {
		d = tok[1:]
	}
	if len(d) == 0 || len(d) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// ReadFile reads the whole trace at path (plain or gzip) with opts. Errors
// about the content are *ParseError naming path.
func ReadFile(path string, opts Options) (Header, []Job, Stats, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, nil, Stats{}, fmt.Errorf("swf: %w", err)
	}
	defer f.Close()
	return ReadAll(f, path, opts)
}

// ReadAll reads a whole trace from r; name is the file name used in errors.
// On an error it returns what was read before it.
func ReadAll(r io.Reader, name string, opts Options) (Header, []Job, Stats, error) {
	rd, err := NewReader(r, name, opts)
	if err != nil {
		return Header{}, nil, Stats{}, err
	}
	var jobs []Job
	for {
		j, err := rd.Next()
		if err == io.EOF {
			return rd.Header(), jobs, rd.Stats(), nil
		}
		if err != nil {
			return rd.Header(), jobs, rd.Stats(), err
		}
		jobs = append(jobs, j)
	}
}
