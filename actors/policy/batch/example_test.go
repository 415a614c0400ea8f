package batch_test

import (
	"fmt"
	"time"

	"github.com/koala-emu/koala-emu/actors/policy/batch"
)

// A cluster actor calls Schedule at every event (a job queued, a job ended
// early, a walltime reached, a reservation due), starts Plan.Start and stores
// every other reservation back into its queue as Held.
func Example() {
	s := func(n int) time.Duration { return time.Duration(n) * time.Second }
	p, _ := batch.New("cbf")
	running := []batch.Running{{ID: "A", Procs: 2, Start: 0, Walltime: s(100)}}
	queue := []batch.Queued{
		{ID: "B", Procs: 4, Walltime: s(50)},
		{ID: "C", Procs: 2, Walltime: s(60)},
	}
	plan, _ := p.Schedule(0, 4, running, queue)
	fmt.Println("start now:", plan.Start)
	for _, r := range plan.Reservations {
		fmt.Printf("%s reserved at %v\n", r.ID, r.Start)
	}
	// What a new 2-processor job of one hour would get: the server's estimate.
	c, _ := plan.Completion(2, s(3600))
	fmt.Println("a new job would complete at", c)
	// Output:
	// start now: [C]
	// B reserved at 1m40s
	// C reserved at 0s
	// a new job would complete at 1h2m30s
}
