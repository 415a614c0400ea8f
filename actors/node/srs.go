package node

// This file is the node's side of SRS (SPEC §6's stop/restart library):
// the runtime a checkpointable rank runs under, and the depot that keeps
// the node's checkpoints (its "local disk") and serves them to the ranks
// that restart elsewhere, through the node's egress, so a checkpoint read
// across the wide area takes what the shaped links give it.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/nodes/apps"
	"github.com/koala-emu/koala-emu/nodes/comm"
	"github.com/koala-emu/koala-emu/nodes/qr"
	"github.com/koala-emu/koala-emu/nodes/srs"
)

// LayoutOf is a distribution as the wire carries it (block-cyclic on both
// axes, as the checkpointable application lays out its matrix).
func LayoutOf(d srs.Distribution) *msg.Layout {
	return &msg.Layout{Rows: int32(d.Rows), Cols: int32(d.Cols), ProcsRows: int32(d.Row.Procs), ProcsCols: int32(d.Col.Procs), Nb: int32(d.Row.NB)}
}

// Distribution is the wire layout as a distribution.
func Distribution(l *msg.Layout) srs.Distribution {
	return srs.BlockCyclic2D(int(l.GetRows()), int(l.GetCols()), int(l.GetProcsRows()), int(l.GetProcsCols()), int(l.GetNb()))
}

// depot keeps the node's checkpoints by (job, rank) and serves them.
type depot struct {
	egress netem.Egress

	mu   sync.Mutex
	cps  map[string]apps.Checkpoint
	ln   net.Listener
	addr string
	wg   sync.WaitGroup
}

func depotKey(job string, rank int) string { return fmt.Sprintf("%s/%d", job, rank) }

// put stores a checkpoint and returns the depot's address, listening on
// host the first time.
func (d *depot) put(host, job string, cp apps.Checkpoint) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ln == nil {
		ln, err := net.Listen("tcp", host+":0")
		if err != nil {
			return "", fmt.Errorf("depot: listen: %w", err)
		}
		d.ln, d.addr = ln, ln.Addr().String()
		d.wg.Add(1)
		go d.serve(ln)
	}
	if d.cps == nil {
		d.cps = map[string]apps.Checkpoint{}
	}
	d.cps[depotKey(job, cp.Rank)] = cp
	return d.addr, nil
}

// close stops serving.
func (d *depot) close() {
	d.mu.Lock()
	ln := d.ln
	d.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
		d.wg.Wait()
	}
}

// fetchRequest asks a depot for the part of old rank From's checkpoint of
// Job that new rank To of layout Layout holds, to be sent to a node of
// Cluster.
type fetchRequest struct {
	Job     string
	From    int
	To      int
	Cluster string
	Layout  [5]int // rows, cols, process rows, process columns, block size
}

func gridOf(d srs.Distribution) [5]int {
	return [5]int{d.Rows, d.Cols, d.Row.Procs, d.Col.Procs, d.Row.NB}
}

func (d *depot) serve(ln net.Listener) {
	defer d.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer c.Close()
			_ = d.answer(c)
		}()
	}
}

// answer reads one request and writes the part asked for (8-byte length,
// then the bytes; a length of 2^64-1 and an error text when it cannot).
// The request comes unshaped (it is small, and says which cluster the
// asking node is in); the answer goes through the node's egress to that
// cluster, framed by the shaper (the asking side reads it through its
// own).
func (d *depot) answer(c net.Conn) error {
	var n uint32
	if err := binary.Read(c, binary.LittleEndian, &n); err != nil || n > 1<<16 {
		return fmt.Errorf("depot: request length: %v", err)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	var req fetchRequest
	if err := json.Unmarshal(buf, &req); err != nil {
		return err
	}
	part, err := d.part(req)
	w := d.egress.Wrap(c, req.Cluster)
	if err != nil {
		msgText := []byte(err.Error())
		_ = binary.Write(w, binary.LittleEndian, ^uint64(0))
		_ = binary.Write(w, binary.LittleEndian, uint32(len(msgText)))
		_, werr := w.Write(msgText)
		return werr
	}
	if err := binary.Write(w, binary.LittleEndian, uint64(len(part))); err != nil {
		return err
	}
	_, err = w.Write(part)
	return err
}

func (d *depot) part(req fetchRequest) ([]byte, error) {
	d.mu.Lock()
	cp, ok := d.cps[depotKey(req.Job, req.From)]
	d.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no checkpoint of job %s rank %d here", req.Job, req.From)
	}
	l := req.Layout
	plan, err := srs.Redistribute(cp.Layout, srs.BlockCyclic2D(l[0], l[1], l[2], l[3], l[4]), qr.ElemSize)
	if err != nil {
		return nil, err
	}
	msgs, err := plan.Pack(req.From, cp.Local)
	if err != nil {
		return nil, err
	}
	return msgs[req.To], nil
}

// fetch reads new rank `to`'s part of old rank `from`'s checkpoint from
// the depot at addr; the answer is read through egress (both ends of a
// shaped connection are wrapped).
func fetch(ctx context.Context, addr string, egress netem.Egress, srcCluster string, req fetchRequest) ([]byte, error) {
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if err := binary.Write(c, binary.LittleEndian, uint32(len(b))); err != nil {
		return nil, err
	}
	if _, err := c.Write(b); err != nil {
		return nil, err
	}
	rc := egress.Wrap(c, srcCluster)
	var n uint64
	if err := binary.Read(rc, binary.LittleEndian, &n); err != nil {
		return nil, err
	}
	if n == ^uint64(0) {
		var l uint32
		if err := binary.Read(rc, binary.LittleEndian, &l); err != nil || l > 1<<16 {
			return nil, errors.New("depot refused")
		}
		t := make([]byte, l)
		_, _ = io.ReadFull(rc, t)
		return nil, fmt.Errorf("depot %s: %s", addr, t)
	}
	if n > 1<<34 {
		return nil, fmt.Errorf("depot %s: part of %d bytes", addr, n)
	}
	out := make([]byte, n)
	_, err = io.ReadFull(rc, out)
	return out, err
}

// rankSRS is the SRS runtime of one rank on this node.
type rankSRS struct {
	n *node
	r *rank
}

// Restart reads the rank's block from the old ranks' depots, all at once,
// redistributed onto layout.
func (s rankSRS) Restart(ctx context.Context, c *comm.Comm, layout srs.Distribution) (int, []byte, bool, error) {
	rs := s.r.restart
	if rs == nil {
		return 0, nil, false, nil
	}
	plan, err := srs.Redistribute(Distribution(rs.Layout), layout, qr.ElemSize)
	if err != nil {
		return 0, nil, false, err
	}
	addr, cluster := map[int]string{}, map[int]string{}
	for _, src := range rs.Sources {
		addr[int(src.Rank)], cluster[int(src.Rank)] = src.DepotAddr, src.Cluster
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	msgs := map[int][]byte{}
	var errs []error
	for _, t := range plan.Transfers {
		if t.To != c.Rank() {
			continue
		}
		wg.Add(1)
		go func(from int) {
			defer wg.Done()
			b, err := fetch(ctx, addr[from], s.n.cfg.Egress, cluster[from], fetchRequest{Job: s.r.job, From: from, To: c.Rank(), Cluster: s.n.cfg.Cluster, Layout: gridOf(layout)})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("old rank %d: %w", from, err))
				return
			}
			msgs[from] = b
		}(t.From)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, nil, false, err
	}
	local, err := plan.Unpack(c.Rank(), msgs)
	if err != nil {
		return 0, nil, false, err
	}
	return int(rs.Phase), local, true, nil
}

// Phase reports the phase to the runner and says whether a stop was asked.
func (s rankSRS) Phase(k int, took time.Duration) bool {
	factor := 1.0
	if s.n.cfg.Env.Clock != nil {
		factor = s.n.cfg.Env.Clock.Factor()
	}
	s.n.cfg.Env.System.Root.Send(s.r.runner, &msg.PhaseDone{JobId: s.r.job, Rank: s.r.rank, Phase: int32(k), TookS: took.Seconds() * factor})
	return s.r.stop.Load()
}

// Write keeps the checkpoint in the node's depot and tells the runner.
func (s rankSRS) Write(cp apps.Checkpoint) error {
	start := time.Now()
	cp.Local = append([]byte(nil), cp.Local...)
	addr, err := s.n.depot.put(s.n.cfg.ListenHost, s.r.job, cp)
	if err != nil {
		return err
	}
	factor := 1.0
	if s.n.cfg.Env.Clock != nil {
		factor = s.n.cfg.Env.Clock.Factor()
	}
	s.n.cfg.Env.System.Root.Send(s.r.runner, &msg.RankStopped{JobId: s.r.job, Rank: s.r.rank, Node: s.n.cfg.Name, Cluster: s.n.cfg.Cluster,
		Phase: int32(cp.Phase), DepotAddr: addr, Layout: LayoutOf(cp.Layout), WriteS: time.Since(start).Seconds() * factor})
	return nil
}

var _ apps.SRS = rankSRS{}
