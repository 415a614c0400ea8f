package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/clock"
)

// barrierProber answers a probe only once every target is being measured,
// so a manager that measured its links one after the other would never
// get past the first; the link to "bad" fails.
type barrierProber struct {
	mu      sync.Mutex
	waiting int
	all     int
	open    chan struct{}
}

func (p *barrierProber) Addr() string { return "c:0" }

func (p *barrierProber) Measure(ctx context.Context, dst, _ string, _ int) (time.Duration, float64, error) {
	p.mu.Lock()
	p.waiting++
	if p.waiting == p.all {
		close(p.open)
	}
	p.mu.Unlock()
	select {
	case <-p.open:
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	if dst == "bad" {
		return 0, 0, errors.New("refused")
	}
	return time.Duration(len(dst)) * time.Millisecond, 1e6, nil
}

// A cluster manager probes its links at once, and reports each measured
// link in the order it was asked, with the failed one named.
func TestProbeMeasuresLinksAtOnce(t *testing.T) {
	sys := actor.NewActorSystem(actors.QuietLogging())
	t.Cleanup(sys.Shutdown)
	targets := []*msg.ProbeTarget{{Cluster: "c"}, {Cluster: "bad"}, {Cluster: "delft"}, {Cluster: "leiden1"}}
	p := &barrierProber{all: len(targets), open: make(chan struct{})}
	results := make(chan *msg.ProbeResult, 1)
	kis := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if x, ok := ctx.Message().(*msg.ProbeResult); ok {
			results <- x
		}
	}))
	env := actors.Env{System: sys, Clock: clock.NewScaled(1)}
	m := sys.Root.Spawn(Props(Config{Name: "c", Nodes: []NodeInfo{{Name: "c-n000"}}, KIS: kis, Prober: p,
		ProbeTimeout: 30 * time.Second, Processors: 2, Env: env}))
	sys.Root.Send(m, &msg.ProbeRequest{Targets: targets, ReplyTo: msg.FromPID(kis)})
	var r *msg.ProbeResult
	select {
	case r = <-results:
	case <-time.After(time.Minute):
		t.Fatal("no probe result")
	}
	want := []string{"c", "delft", "leiden1"}
	if len(r.Links) != len(want) || r.Error != "c->bad: refused" {
		t.Fatalf("links %v, error %q", r.Links, r.Error)
	}
	for i, l := range r.Links {
		if l.Src != "c" || l.Dst != want[i] || l.LatencyMs != float64(len(want[i])) || !l.Measured {
			t.Fatalf("link %d: %v", i, l)
		}
	}
}
