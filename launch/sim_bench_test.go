package launch

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/koala-emu/koala-emu/scenarios"
)

// BenchmarkSimBatchFCFS simulates the SimGrid comparison's workload
// (bench/simgrid: 1,000 rigid CTC SP2 jobs on one 256-processor FCFS batch
// cluster), results written, and reports simulated jobs per second.
func BenchmarkSimBatchFCFS(b *testing.B) {
	s, err := scenarios.Load(filepath.Join("..", "bench", "simgrid", "fcfs-256.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	plan, err := s.Expand(ScenarioEnv(), scenarios.Overrides{})
	if err != nil {
		b.Fatal(err)
	}
	be, err := LookupBackend("sim")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		res, err := be.Run(context.Background(), plan, Options{Out: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		if n := len(res.Jobs); n != len(plan.Jobs) {
			b.Fatalf("%d of %d jobs in the results", n, len(plan.Jobs))
		}
	}
	b.ReportMetric(float64(len(plan.Jobs)*b.N)/b.Elapsed().Seconds(), "jobs/s")
}
