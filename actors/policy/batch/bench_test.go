package batch

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchState is a busy cluster of 640 processors: 100 running jobs and a
// queue of n jobs holding the reservations of an earlier plan, as a cluster
// replaying a heavy month of trace would have.
func benchState(b *testing.B, p Policy, n int) ([]Running, []Queued) {
	rng := rand.New(rand.NewPCG(1, 2))
	var running []Running
	used := 0
	for i := 0; i < 100; i++ {
		procs := 1 + rng.IntN(12)
		if used+procs > 640 {
			break
		}
		used += procs
		running = append(running, Running{ID: fmt.Sprintf("r%d", i), Procs: procs, Start: 0, Walltime: sec(60 + rng.IntN(36000))})
	}
	queue := make([]Queued, n)
	for i := range queue {
		queue[i] = Queued{ID: fmt.Sprintf("q%d", i), Procs: 1 + rng.IntN(64), Walltime: sec(60 + rng.IntN(36000))}
	}
	plan, err := p.Schedule(0, 640, running, queue)
	if err != nil {
		b.Fatal(err)
	}
	for i, r := range plan.Reservations {
		queue[i].Held, queue[i].Reserved = true, r.Start
	}
	// One running job ends early: the next plan compresses.
	running = running[1:]
	return running, queue
}

func BenchmarkSchedule(b *testing.B) {
	for _, p := range []Policy{FCFS{}, CBF{}} {
		for _, n := range []int{100, 1000} {
			running, queue := benchState(b, p, n)
			b.Run(fmt.Sprintf("%s/queue=%d", p.Name(), n), func(b *testing.B) {
				for b.Loop() {
					if _, err := p.Schedule(time.Second, 640, running, queue); err != nil {
						b.Fatal(err)
					}
				}
			})
			plan, _ := p.Schedule(time.Second, 640, running, queue)
			b.Run(fmt.Sprintf("%s/completion/queue=%d", p.Name(), n), func(b *testing.B) {
				for b.Loop() {
					if _, err := plan.Completion(32, sec(3600)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
