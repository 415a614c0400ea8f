package invariant

import (
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors"
	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/clock"
	"github.com/koala-emu/koala-emu/internal/waittest"
)

// A failed check is counted, kept in the details and emitted as an event; a
// passing one is only counted, and its detail is never built.
func TestCheckCountsAndReports(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer sys.Shutdown()
	var mu sync.Mutex
	var got []*msg.Event
	rec := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if ev, ok := ctx.Message().(*msg.Event); ok {
			mu.Lock()
			got = append(got, ev)
			mu.Unlock()
		}
	}))
	env := actors.Env{System: sys, Clock: clock.NewScaled(1), Recorder: rec}
	st := NewStats()
	if !Check(env, st, "mmanager", "j1", Bounds, true, func() string { t.Fatal("detail built for a passing check"); return "" }) {
		t.Fatal("a passing check returned false")
	}
	if Check(env, st, "mrunner", "j2", Pow2, false, func() string { return "on 6 processors" }) {
		t.Fatal("a failed check returned true")
	}
	want := Summary{Checks: map[string]int{Bounds: 1, Pow2: 1}, Violations: map[string]int{Pow2: 1},
		Details: []string{Pow2 + ": on 6 processors"}}
	if s := st.Snapshot(); !reflect.DeepEqual(s, want) || s.OK() {
		t.Fatalf("snapshot %+v (ok %v), want %+v", s, s.OK(), want)
	}
	waittest.Until(t, 5*time.Second, "the violation's event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].Kind != "invariant_violation" || got[0].JobId != "j2" || got[0].Source != "mrunner" ||
		got[0].Fields["invariant"] != Pow2 || got[0].Fields["detail"] != "on 6 processors" {
		t.Fatalf("events %v", got)
	}
}

// A nil Stats counts nothing and its snapshot is empty, not nil.
func TestNilStats(t *testing.T) {
	var st *Stats
	st.record(Bounds, false, "x")
	if s := st.Snapshot(); s.Checks == nil || len(s.Checks) != 0 || !s.OK() {
		t.Fatalf("snapshot of nil Stats %+v", s)
	}
}
