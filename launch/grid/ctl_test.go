package grid

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/koala-emu/koala-emu/actors/msg"
)

// A host's control actor obeys a GridStop its run's launcher asks for and
// ignores one another actor system asks for (an earlier run's launcher
// whose remote still delivers to the address this host reuses).
func TestCtlObeysOnlyItsLauncher(t *testing.T) {
	system := actor.NewActorSystem(logTo(io.Discard, slog.LevelError))
	defer system.Shutdown()
	for _, tc := range []struct {
		launcher string
		obeyed   bool
	}{
		{"10.200.0.1:40123", false}, // the asker's system has another address
		{system.Address(), true},
	} {
		var stopped atomic.Bool
		h := &host{cfg: HostConfig{Name: "vrije-n001"}, grid: &Grid{Launcher: tc.launcher}, stopBy: make(chan *actor.PID, 1),
			stop: func() { stopped.Store(true) }, logf: func(string, ...any) {}}
		ctl := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &ctlActor{h: h} }))
		_, err := system.Root.RequestFuture(ctl, &msg.GridStop{}, 200*time.Millisecond).Result()
		// Drain: the actor handles one message at a time, so a second
		// request answered (or timed out) means the first was handled.
		_, _ = system.Root.RequestFuture(ctl, &msg.GridStop{}, 200*time.Millisecond).Result()
		if stopped.Load() != tc.obeyed || h.quiet.Load() != tc.obeyed {
			t.Errorf("launcher %s, asked from %s: stopped %v (err %v), want %v", tc.launcher, system.Address(), stopped.Load(), err, tc.obeyed)
		}
		system.Root.Stop(ctl)
	}
	if !fromLauncher(nil, "10.200.0.1:40123") {
		t.Error("a message without a sender (a lost node, from another host) refused")
	}
}
