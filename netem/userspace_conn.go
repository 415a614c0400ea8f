package netem

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/koala-emu/koala-emu/netem/ptimer"
)

// The framing of a shaped connection: the stream opens with frameMagic,
// then every segment is a header (delivery time, Mono ns, big-endian int64;
// payload length, uint32) followed by the payload.
const (
	frameMagic  = "KSH1"
	frameHeader = 12
	// maxFrame is the largest payload a reader accepts in one frame.
	maxFrame = 1 << 20
	// readBuffer is the reading side's buffer: small frames arrive with
	// their header in one read; large payloads are read straight into their
	// segment buffer.
	readBuffer = 4 << 10
)

// ErrNotShaped is returned by a shaped connection's Read when the peer's
// bytes are not framed by a userspace shaper: both ends of a connection
// must be wrapped (UserspaceEgress.Wrap).
var ErrNotShaped = errors.New("netem: the peer does not shape this connection (both ends must be wrapped by a userspace shaper)")

// HeldReader is implemented by the userspace shaper's connections. A reader
// that knows its own message boundaries may take bytes as soon as they have
// arrived (ReadHeld, which also returns the delivery time of the last of
// them) and hold them itself until then (Hold), in the goroutine that will
// use them. nodes/comm does: a rank then resumes at its message's delivery
// time without first waking the goroutine that reads the connection, which
// halves the wake-ups at the instant a lock-step exchange is delivered.
type HeldReader interface {
	// ReadHeld reads like Read but does not hold: due is the delivery time
	// (Mono ns) of the last byte returned; the bytes must not be used
	// before it.
	ReadHeld(p []byte) (n int, due int64, err error)
	// Hold returns at due (Mono ns), or with ctx's error, or net.ErrClosed
	// when the connection closes; the release counts in the shaper's
	// lateness statistics.
	Hold(ctx context.Context, due int64) error
}

var _ HeldReader = (*shapedConn)(nil)

var segPool = sync.Pool{New: func() any { b := make([]byte, DefaultSegmentSize); return &b }}

func getBuf(n int) *[]byte {
	if n <= DefaultSegmentSize {
		b := segPool.Get().(*[]byte)
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n)
	return &b
}

func putBuf(b *[]byte) {
	if cap(*b) == DefaultSegmentSize {
		*b = (*b)[:cap(*b)]
		segPool.Put(b)
	}
}

// shapedConn is one end of a shaped connection: its writes are framed with
// delivery times from its node's link, its reads hold the peer's frames
// until theirs.
type shapedConn struct {
	net.Conn
	e *UserspaceEgress
	p *path

	// Sending side; wmu serialises Write calls (each Write's bytes stay
	// contiguous and the delivery times increase).
	wmu     sync.Mutex
	last    int64 // delivery time of the last segment sent
	started bool  // frameMagic sent
	wbuf    []byte

	// Receiving side; rmu serialises Read calls.
	rmu    sync.Mutex
	br     *bufio.Reader
	framed bool // frameMagic seen
	hdr    [frameHeader]byte
	hdrN   int     // header bytes read of the next frame
	seg    *[]byte // payload of the current frame
	segN   int     // payload bytes read
	due    int64   // the current frame's delivery time
	held   bool    // the current frame has been released
	off    int     // payload bytes handed to the reader
	magic  [4]byte // the stream's first bytes
	magicN int     // of which read

	// Deadlines as the waits in Write and Read see them.
	dmu      sync.Mutex
	rdl, wdl time.Time
	changed  chan struct{} // closed and replaced when a deadline changes

	done      chan struct{} // closed by Close
	closeOnce sync.Once
	closeErr  error
}

func newShapedConn(c net.Conn, e *UserspaceEgress, p *path) *shapedConn {
	return &shapedConn{Conn: c, e: e, p: p, br: bufio.NewReaderSize(c, readBuffer),
		changed: make(chan struct{}), done: make(chan struct{})}
}

// Write frames b in segments of at most SegmentSize, each stamped with its
// delivery time, and writes them at once. It waits first while the link is
// booked further ahead than the backlog bound allows.
func (c *shapedConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	written := 0
	for len(b) > 0 {
		n := min(len(b), c.e.segSize)
		if err := c.waitUncut(); err != nil {
			return written, err
		}
		if err := c.pace(); err != nil {
			return written, err
		}
		now := ptimer.Mono()
		at := max(c.p.reserve(now, n), c.last)
		c.last = at
		frame := c.frame(at, b[:n])
		m, err := c.Conn.Write(frame)
		if err != nil {
			lost := n - min(n, max(0, m-(len(frame)-n)))
			c.e.drops.Add(int64(lost))
			return written + n - lost, err
		}
		written += n
		b = b[n:]
	}
	return written, nil
}

// frame builds one segment's frame in the connection's write buffer.
func (c *shapedConn) frame(at int64, payload []byte) []byte {
	need := frameHeader + len(payload)
	if !c.started {
		need += len(frameMagic)
	}
	if cap(c.wbuf) < need {
		c.wbuf = make([]byte, need)
	}
	buf := c.wbuf[:need]
	h := buf
	if !c.started {
		copy(buf, frameMagic)
		h = buf[len(frameMagic):]
		c.started = true
	}
	binary.BigEndian.PutUint64(h[0:8], uint64(at))
	binary.BigEndian.PutUint32(h[8:12], uint32(len(payload)))
	copy(h[frameHeader:], payload)
	return buf
}

// pace waits while the link's bucket is booked more than the backlog bound
// ahead of now.
func (c *shapedConn) pace() error {
	if c.p.rate <= 0 {
		return nil
	}
	for {
		over := c.p.backlog(ptimer.Mono()) - c.p.ahead
		if over <= 0 {
			return nil
		}
		if err := c.wait(time.Duration(over), nil, nil, onWrite); err != nil {
			return err
		}
	}
}

// Read returns bytes of the peer's frames whose delivery time has come,
// holding the next frame until then.
func (c *shapedConn) Read(p []byte) (int, error) {
	n, _, err := c.read(p, true)
	return n, err
}

// ReadHeld implements HeldReader.
func (c *shapedConn) ReadHeld(p []byte) (int, int64, error) {
	return c.read(p, false)
}

// Hold implements HeldReader.
func (c *shapedConn) Hold(ctx context.Context, due int64) error {
	if ptimer.Mono() >= due {
		return nil // its time came while the reader was busy elsewhere: no release to time
	}
	if err := c.hold(due, ctx.Done(), false); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return err
	}
	c.e.lat.Record(time.Duration(ptimer.Mono() - due))
	return nil
}

func (c *shapedConn) read(p []byte, hold bool) (int, int64, error) {
	if len(p) == 0 {
		return 0, 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if !c.framed {
		if err := c.readMagic(); err != nil {
			return 0, 0, err
		}
	}
	if c.seg == nil || c.segN < len(*c.seg) || (hold && !c.held) {
		if err := c.nextFrame(hold); err != nil {
			return 0, 0, err
		}
	}
	due := c.due
	n := copy(p, (*c.seg)[c.off:])
	c.off += n
	if c.off == len(*c.seg) {
		putBuf(c.seg)
		c.seg, c.segN, c.off, c.hdrN, c.held = nil, 0, 0, 0, false
	}
	return n, due, nil
}

// readMagic reads the stream's opening bytes (keeping progress across a
// deadline).
func (c *shapedConn) readMagic() error {
	if err := fill(c.br, c.magic[:], &c.magicN); err != nil {
		return err
	}
	if string(c.magic[:]) != frameMagic {
		return ErrNotShaped
	}
	c.framed = true
	return nil
}

// nextFrame reads the next frame (or finishes reading it after an earlier
// deadline) and, with hold, holds it until its delivery time.
func (c *shapedConn) nextFrame(hold bool) error {
	if c.seg == nil {
		if err := fill(c.br, c.hdr[:], &c.hdrN); err != nil {
			if c.hdrN > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		n := int(binary.BigEndian.Uint32(c.hdr[8:12]))
		if n == 0 || n > maxFrame {
			return fmt.Errorf("netem: shaped stream corrupt: a frame of %d bytes", n)
		}
		c.due = int64(binary.BigEndian.Uint64(c.hdr[0:8]))
		c.seg, c.segN = getBuf(n), 0
	}
	if c.segN < len(*c.seg) {
		if err := fill(c.br, *c.seg, &c.segN); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		c.e.segments.Add(1)
		c.e.bytes.Add(int64(len(*c.seg)))
	}
	if hold && !c.held {
		if err := c.hold(c.due, nil, true); err != nil {
			return err
		}
		c.held = true
		c.e.lat.Record(time.Duration(ptimer.Mono() - c.due))
	}
	return nil
}

// fill reads into b[*n:] until b is full, advancing *n as bytes arrive.
func fill(r io.Reader, b []byte, n *int) error {
	for *n < len(b) {
		m, err := r.Read(b[*n:])
		*n += m
		if err != nil && *n < len(b) {
			return err
		}
	}
	return nil
}

// hold returns at the delivery time due (Mono ns): it spins when due is
// within InlineSpin, waits for the delay line's wake-up when it is within
// ptimer.CoarseThreshold (letting the line be HoldTolerance of the link's
// latency late rather than spin for it), and sleeps on a Go timer before
// that. It gives up
// when cancel fires (context.Canceled), the connection closes, or, with
// deadline, the read deadline passes.
func (c *shapedConn) hold(due int64, cancel <-chan struct{}, deadline bool) error {
	for {
		d := time.Duration(due - ptimer.Mono())
		switch {
		case d <= 0:
			return nil
		case d <= c.e.inlineSpin:
			for ptimer.Mono() < due {
			}
			return nil
		case d > ptimer.CoarseThreshold:
			if err := c.wait(d-ptimer.CoarseGuard, nil, cancel, readDeadline(deadline)); err != nil {
				return err
			}
		default:
			woken := make(chan struct{}, 1)
			c.e.line.WakeWithin(ptimer.MonoTime(due), c.p.holdTolerance(), woken)
			if err := c.wait(-1, woken, cancel, readDeadline(deadline)); err != nil {
				return err
			}
		}
	}
}

// Which deadline a wait honours.
type deadlineKind int

const (
	noDeadline deadlineKind = iota
	onRead
	onWrite
)

func readDeadline(honour bool) deadlineKind {
	if honour {
		return onRead
	}
	return noDeadline
}

// wait blocks until d passes (d < 0: no time limit), sig fires, cancel
// fires (context.Canceled), the connection closes (net.ErrClosed) or the
// deadline of kind dk passes (os.ErrDeadlineExceeded). A deadline set
// meanwhile is taken into account.
func (c *shapedConn) wait(d time.Duration, sig, cancel <-chan struct{}, dk deadlineKind) error {
	var after <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		after = t.C
	}
	for {
		c.dmu.Lock()
		var dl time.Time
		switch dk {
		case onRead:
			dl = c.rdl
		case onWrite:
			dl = c.wdl
		}
		changed := c.changed
		c.dmu.Unlock()
		var expired <-chan time.Time
		var dt *time.Timer
		if !dl.IsZero() {
			left := time.Until(dl)
			if left <= 0 {
				return os.ErrDeadlineExceeded
			}
			dt = time.NewTimer(left)
			expired = dt.C
		}
		var err error
		again := false
		select {
		case <-after:
		case <-sig:
		case <-c.done:
			err = net.ErrClosed
		case <-cancel:
			err = context.Canceled
		case <-changed:
			again = true
		case <-expired:
			err = os.ErrDeadlineExceeded
		}
		if dt != nil {
			dt.Stop()
		}
		if !again {
			return err
		}
	}
}

// Close closes the connection; a Write or Read waiting in the shaper
// returns net.ErrClosed. What was written is on the wire already: the peer
// still receives it, each frame at its delivery time.
func (c *shapedConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.done)
		c.closeErr = c.Conn.Close()
	})
	return c.closeErr
}

// CloseWrite half-closes the connection when the underlying connection
// supports it, after the Write in progress (if any).
func (c *shapedConn) CloseWrite() error {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok {
		return fmt.Errorf("netem: %T cannot half-close", c.Conn)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return cw.CloseWrite()
}

// SetNoDelay forwards to the underlying TCP connection if it has one.
func (c *shapedConn) SetNoDelay(noDelay bool) error {
	if t, ok := c.Conn.(interface{ SetNoDelay(bool) error }); ok {
		return t.SetNoDelay(noDelay)
	}
	return nil
}

// SetDeadline sets the read and the write deadline.
func (c *shapedConn) SetDeadline(t time.Time) error {
	c.setDeadlines(&t, &t)
	return c.Conn.SetDeadline(t)
}

// SetReadDeadline bounds both a hold and the underlying socket reads.
func (c *shapedConn) SetReadDeadline(t time.Time) error {
	c.setDeadlines(&t, nil)
	return c.Conn.SetReadDeadline(t)
}

// SetWriteDeadline bounds both the pacing wait in Write and the underlying
// socket writes.
func (c *shapedConn) SetWriteDeadline(t time.Time) error {
	c.setDeadlines(nil, &t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *shapedConn) setDeadlines(r, w *time.Time) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if r != nil {
		c.rdl = *r
	}
	if w != nil {
		c.wdl = *w
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

// Unwrap returns the underlying connection.
func (c *shapedConn) Unwrap() net.Conn { return c.Conn }
