package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// A small client of the kernel's nfnetlink_queue protocol: bind a queue,
// receive queued packets (id, length, kernel timestamp, IPv4 destination)
// and release them with batch verdicts. Messages are encoded and decoded
// with github.com/mdlayher/netlink; the socket itself is a plain
// non-blocking file descriptor so that the delay line's thread can wait on
// it with ppoll together with its deadlines, without the Go netpoller (one
// thread, no hand-offs between goroutines on the packet path).

// Message types of the queue subsystem (linux/netfilter/nfnetlink_queue.h).
const (
	nfqnlMsgPacket       = 0
	nfqnlMsgVerdict      = 1
	nfqnlMsgConfig       = 2
	nfqnlMsgVerdictBatch = 3
)

// Attributes of packet and verdict messages.
const (
	nfqaPacketHdr  = 1
	nfqaVerdictHdr = 2
	nfqaTimestamp  = 4
	nfqaPayload    = 10
	nfqaCapLen     = 13
)

// Attributes and values of config messages.
const (
	nfqaCfgCmd      = 1
	nfqaCfgParams   = 2
	nfqaCfgQueueMax = 3
	nfqaCfgMask     = 4
	nfqaCfgFlags    = 5

	nfqnlCfgCmdBind   = 1
	nfqnlCfgCmdUnbind = 2

	nfqnlCopyPacket = 2

	// nfqaCfgFGSO asks the kernel to queue GSO packets whole instead of
	// segmenting them: one verdict releases up to 64 KB.
	nfqaCfgFGSO = 1 << 2
)

// nfAccept is the netfilter verdict that lets a packet continue.
const nfAccept = 1

// copyRange is how many bytes of each packet the kernel copies to us: the
// IPv4 header and the TCP header's data offset, enough to see the sender
// and how much of the packet is payload (the delay line's serialiser
// charges payload bytes).
const copyRange = 40

// assumedTCPHeader is the TCP header length taken when the copy does not
// reach the data offset (IPv4 options): the header with timestamps.
const assumedTCPHeader = 32

// nfqSock is one netlink socket bound to one or more queues.
type nfqSock struct {
	fd   int
	seq  uint32
	vbuf [32]byte
}

// qpacket is one queued packet as reported by the kernel.
type qpacket struct {
	queue uint16
	id    uint32
	len   int     // full length of the packet (a GSO packet counts whole)
	src   [4]byte // IPv4 source, valid when hdr
	hdr   bool
	// payload is what the packet carries beyond its IPv4 and TCP (or UDP)
	// headers: a GSO packet's whole payload, 0 for a pure ACK.
	payload int
	// stamp is the packet's kernel timestamp in ns (for TCP, CLOCK_MONOTONIC
	// transmit time), 0 when the packet carries none.
	stamp int64
}

var errAgain = errors.New("nfqueue: no message waiting")

func nfgenHeader(queue uint16) []byte {
	// struct nfgenmsg { u8 family; u8 version; __be16 res_id; }
	return []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, byte(queue >> 8), byte(queue)}
}

// openNFQ opens a non-blocking netfilter netlink socket in the namespace
// nsFd refers to (0: the calling thread's namespace), with a large receive
// buffer and without ENOBUFS errors (overflow shows in the kernel's drop
// counters instead).
func openNFQ(nsFd int, rcvbuf int) (*nfqSock, error) {
	var fd int
	open := func() error {
		var err error
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_NETFILTER)
		return err
	}
	var err error
	if nsFd > 0 {
		err = inNamespace(nsFd, open)
	} else {
		err = open()
	}
	if err != nil {
		return nil, fmt.Errorf("nfqueue: socket: %w", err)
	}
	s := &nfqSock{fd: fd, seq: uint32(time.Now().UnixNano())}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("nfqueue: bind socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_NO_ENOBUFS, 1); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("nfqueue: NETLINK_NO_ENOBUFS: %w", err)
	}
	if rcvbuf > 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf); err != nil {
			_ = unix.Close(fd)
			return nil, fmt.Errorf("nfqueue: SO_RCVBUFFORCE: %w", err)
		}
	}
	return s, nil
}

func (s *nfqSock) send(m netlink.Message) error {
	m.Header.Length = uint32(16 + len(m.Data))
	b, err := m.MarshalBinary()
	if err != nil {
		return fmt.Errorf("nfqueue: marshal: %w", err)
	}
	for {
		err = unix.Sendto(s.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// config sends one config message for a queue and waits (up to a second)
// for the kernel's acknowledgement. Packet messages that arrive meanwhile
// are discarded: configuration happens before any rule diverts packets.
func (s *nfqSock) config(queue uint16, attrs []netlink.Attribute) error {
	ab, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		return fmt.Errorf("nfqueue: marshal config: %w", err)
	}
	s.seq++
	seq := s.seq
	if err := s.send(netlink.Message{
		Header: netlink.Header{
			Type:     netlink.HeaderType(unix.NFNL_SUBSYS_QUEUE<<8 | nfqnlMsgConfig),
			Flags:    netlink.Request | netlink.Acknowledge,
			Sequence: seq,
		},
		Data: append(nfgenHeader(queue), ab...),
	}); err != nil {
		return fmt.Errorf("nfqueue: send config: %w", err)
	}
	buf := make([]byte, 1<<16)
	deadline := time.Now().Add(time.Second)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return errors.New("nfqueue: no acknowledgement from the kernel within 1s")
		}
		ts := unix.NsecToTimespec(int64(left))
		pfd := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}
		if _, err := unix.Ppoll(pfd, &ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("nfqueue: poll: %w", err)
		}
		n, _, err := unix.Recvfrom(s.fd, buf, unix.MSG_DONTWAIT)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("nfqueue: receive: %w", err)
		}
		msgs, err := splitMessages(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Type != netlink.Error || m.Header.Sequence != seq {
				continue
			}
			if len(m.Data) < 4 {
				return errors.New("nfqueue: short acknowledgement")
			}
			if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
				return unix.Errno(-e)
			}
			return nil
		}
	}
}

// splitMessages cuts a datagram into netlink messages.
func splitMessages(b []byte) ([]netlink.Message, error) {
	var msgs []netlink.Message
	for len(b) >= 16 {
		l := int(binary.NativeEndian.Uint32(b))
		if l < 16 || l > len(b) {
			return msgs, fmt.Errorf("nfqueue: malformed message (length %d of %d)", l, len(b))
		}
		var m netlink.Message
		if err := m.UnmarshalBinary(b[:l]); err != nil {
			return msgs, fmt.Errorf("nfqueue: message: %w", err)
		}
		msgs = append(msgs, m)
		al := (l + 3) &^ 3
		if al > len(b) {
			break
		}
		b = b[al:]
	}
	return msgs, nil
}

// bind attaches the socket to a queue, asks for the first copyRange bytes
// of every packet, whole GSO packets, and at most maxLen waiting packets
// (more are dropped by the kernel and counted).
func (s *nfqSock) bind(queue uint16, maxLen uint32) error {
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, 0}
	if err := s.config(queue, []netlink.Attribute{{Type: nfqaCfgCmd, Data: cmd}}); err != nil {
		return fmt.Errorf("nfqueue: bind queue %d: %w", queue, err)
	}
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params, copyRange)
	params[4] = nfqnlCopyPacket
	ml := binary.BigEndian.AppendUint32(nil, maxLen)
	flags := binary.BigEndian.AppendUint32(nil, nfqaCfgFGSO)
	if err := s.config(queue, []netlink.Attribute{
		{Type: nfqaCfgParams, Data: params},
		{Type: nfqaCfgQueueMax, Data: ml},
		{Type: nfqaCfgMask, Data: flags},
		{Type: nfqaCfgFlags, Data: flags},
	}); err != nil {
		return errors.Join(fmt.Errorf("nfqueue: configure queue %d: %w", queue, err), s.unbind(queue))
	}
	return nil
}

// unbind detaches the socket from a queue; packets still waiting in it
// are dropped by the kernel.
func (s *nfqSock) unbind(queue uint16) error {
	cmd := []byte{nfqnlCfgCmdUnbind, 0, 0, 0}
	if err := s.config(queue, []netlink.Attribute{{Type: nfqaCfgCmd, Data: cmd}}); err != nil {
		return fmt.Errorf("nfqueue: unbind queue %d: %w", queue, err)
	}
	return nil
}

// appendVerdict encodes a batch verdict: every packet of the queue with an
// id up to and including id gets the verdict. No acknowledgement.
func appendVerdict(b []byte, queue uint16, id, verdict uint32) []byte {
	return appendVerdictMsg(b, nfqnlMsgVerdictBatch, queue, id, verdict)
}

func appendVerdictMsg(b []byte, typ uint16, queue uint16, id, verdict uint32) []byte {
	const l = 16 + 4 + 12
	b = binary.NativeEndian.AppendUint32(b, l)
	b = binary.NativeEndian.AppendUint16(b, unix.NFNL_SUBSYS_QUEUE<<8|typ)
	b = binary.NativeEndian.AppendUint16(b, unix.NLM_F_REQUEST)
	b = binary.NativeEndian.AppendUint32(b, 0) // sequence
	b = binary.NativeEndian.AppendUint32(b, 0) // port id: the kernel fills it
	b = append(b, unix.AF_UNSPEC, unix.NFNETLINK_V0, byte(queue>>8), byte(queue))
	b = binary.NativeEndian.AppendUint16(b, 4+8)
	b = binary.NativeEndian.AppendUint16(b, nfqaVerdictHdr)
	b = binary.BigEndian.AppendUint32(b, verdict)
	b = binary.BigEndian.AppendUint32(b, id)
	return b
}

// appendOneVerdict encodes the verdict of the packet id alone. No
// acknowledgement.
func appendOneVerdict(b []byte, queue uint16, id, verdict uint32) []byte {
	return appendVerdictMsg(b, nfqnlMsgVerdict, queue, id, verdict)
}

// verdicts sends the verdicts encoded in b (one or more messages) in one
// write; the kernel applies them in order. Not safe for concurrent use.
func (s *nfqSock) verdicts(queue uint16, b []byte) error {
	if err := s.write(b); err != nil {
		return fmt.Errorf("nfqueue: verdicts queue %d: %w", queue, err)
	}
	return nil
}

// verdictBatch releases (or drops) every packet of a queue up to id. It
// does not allocate; it is not safe for concurrent use.
func (s *nfqSock) verdictBatch(queue uint16, id, verdict uint32) error {
	if err := s.write(appendVerdict(s.vbuf[:0], queue, id, verdict)); err != nil {
		return fmt.Errorf("nfqueue: verdict queue %d id %d: %w", queue, id, err)
	}
	return nil
}

// write sends b to the kernel (the socket's default peer).
func (s *nfqSock) write(b []byte) error {
	for {
		_, err := unix.Write(s.fd, b)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// recv reads one datagram without blocking and appends its packets to out.
// It returns errAgain when nothing is waiting.
func (s *nfqSock) recv(buf []byte, out []qpacket) ([]qpacket, error) {
	n, err := unix.Read(s.fd, buf) // non-blocking socket; read allocates no address
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return out, errAgain
	}
	if err != nil {
		return out, fmt.Errorf("nfqueue: receive: %w", err)
	}
	b := buf[:n]
	for len(b) >= 16 {
		l := int(binary.NativeEndian.Uint32(b))
		typ := binary.NativeEndian.Uint16(b[4:])
		if l < 16 || l > len(b) {
			return out, fmt.Errorf("nfqueue: malformed message (length %d of %d)", l, len(b))
		}
		if typ == unix.NFNL_SUBSYS_QUEUE<<8|nfqnlMsgPacket {
			p, err := parsePacket(b[16:l])
			if err != nil {
				return out, err
			}
			out = append(out, p)
		}
		al := (l + 3) &^ 3
		if al >= len(b) {
			break
		}
		b = b[al:]
	}
	return out, nil
}

// parsePacket decodes the body of a packet message (nfgenmsg +
// attributes). It walks the attributes by hand: it runs for every packet on
// the delay line's thread and must not allocate.
func parsePacket(b []byte) (qpacket, error) {
	if len(b) < 4 {
		return qpacket{}, errors.New("nfqueue: short packet message")
	}
	p := qpacket{queue: binary.BigEndian.Uint16(b[2:4])}
	var gotHdr bool
	capLen := -1
	hdrLen := 0
	for a := b[4:]; len(a) >= 4; {
		l := int(binary.NativeEndian.Uint16(a))
		typ := binary.NativeEndian.Uint16(a[2:]) & 0x3fff // without nested/byte-order flags
		if l < 4 || l > len(a) {
			return qpacket{}, fmt.Errorf("nfqueue: malformed attribute (length %d of %d)", l, len(a))
		}
		d := a[4:l]
		switch typ {
		case nfqaPacketHdr:
			if len(d) < 4 {
				return qpacket{}, errors.New("nfqueue: short packet header")
			}
			p.id = binary.BigEndian.Uint32(d)
			gotHdr = true
		case nfqaTimestamp:
			if len(d) >= 16 {
				sec := int64(binary.BigEndian.Uint64(d))
				usec := int64(binary.BigEndian.Uint64(d[8:]))
				p.stamp = sec*1e9 + usec*1e3
			}
		case nfqaPayload:
			p.len = len(d)
			if len(d) >= 20 && d[0]>>4 == 4 {
				copy(p.src[:], d[12:16])
				p.hdr = true
				hdrLen = transportHeaders(d)
			}
		case nfqaCapLen:
			if len(d) >= 4 {
				capLen = int(binary.BigEndian.Uint32(d))
			}
		}
		al := (l + 3) &^ 3
		if al >= len(a) {
			break
		}
		a = a[al:]
	}
	if !gotHdr {
		return qpacket{}, errors.New("nfqueue: packet without header")
	}
	if capLen >= 0 {
		p.len = capLen
	}
	p.payload = max(p.len-hdrLen, 0)
	return p, nil
}

// transportHeaders is the length of the IPv4 and TCP or UDP headers at the
// start of an IPv4 packet (d holds at least its first 20 bytes).
func transportHeaders(d []byte) int {
	ihl := int(d[0]&0x0f) * 4
	switch d[9] {
	case unix.IPPROTO_TCP:
		if len(d) > ihl+12 {
			return ihl + int(d[ihl+12]>>4)*4
		}
		return ihl + assumedTCPHeader
	case unix.IPPROTO_UDP:
		return ihl + 8
	}
	return ihl
}

func (s *nfqSock) close() error {
	if err := unix.Close(s.fd); err != nil {
		return fmt.Errorf("nfqueue: close: %w", err)
	}
	return nil
}
