package apps

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/koala-emu/koala-emu/netem"
)

// calMatrix is the calibration topology: two Myri-10G clusters (0.03 ms,
// 560 MB/s inside) joined by a 0.4 ms / 185 MB/s link (DAS-3 Vrije to
// Amsterdam or MultimediaN).
func calMatrix() netem.Matrix {
	intra := netem.Link{Latency: 30 * time.Microsecond, Bandwidth: 560e6}
	inter := netem.Link{Latency: 400 * time.Microsecond, Bandwidth: 185e6}
	return netem.Matrix{Clusters: []string{"a", "b"}, Links: [][]netem.Link{{intra, inter}, {inter, intra}}}
}

// shaped returns per-rank userspace egresses for the given rank clusters.
func shaped(b *testing.B, rs []RankSpec, d float64) func(int) netem.Egress {
	m := calMatrix()
	egs := make([]netem.Egress, len(rs))
	for i, r := range rs {
		plan, err := m.PlanFor(fmt.Sprintf("n%d", i), r.Cluster)
		if err != nil {
			b.Fatal(err)
		}
		switch os.Getenv("KOALA_CAL_EGRESS") {
		case "pass":
			egs[i] = netem.Passthrough{}
		case "inter":
			// Intra-cluster traffic unshaped (0.03 ms is the loopback
			// floor), inter-cluster through the userspace shaper.
			egs[i] = interOnly{own: r.Cluster, shaper: netem.NewUserspace(plan, nil, d)}
		case "noinline":
			u := netem.NewUserspace(plan, nil, d)
			u.InlineSpin = -1
			egs[i] = u
		default:
			f, err := UserspaceEgress(m, rs[i:i+1], d)
			if err != nil {
				b.Fatal(err)
			}
			egs[i] = f(0)
		}
	}
	return func(i int) netem.Egress { return egs[i] }
}

// calWall is the wall time a calibration run aims at (env KOALA_CAL_WALL,
// seconds; default 8).
func calWall() float64 {
	if v, err := strconv.ParseFloat(os.Getenv("KOALA_CAL_WALL"), 64); err == nil && v > 0 {
		return v
	}
	return 8
}

// BenchmarkCalibration runs each application on N ranks in this process
// over loopback through the userspace shaper, on one cluster and split
// over two, and reports scenario seconds (wall x time scale / dilation)
// against Nominal, with the host's message and byte rates. Run with
// -benchtime=1x; select with -bench 'Calibration/wave'.
func BenchmarkCalibration(b *testing.B) {
	type cfg struct {
		app      string
		ranks    int
		dilation float64
		args     map[string]float64
	}
	var cfgs []cfg
	for _, d := range []float64{1, 4} {
		for _, app := range []string{"prime", "poisson", "wave", "allgather"} {
			for _, n := range []int{8, 32} {
				cfgs = append(cfgs, cfg{app: app, ranks: n, dilation: d})
			}
		}
	}
	cfgs = append(cfgs, cfg{app: "ccr", ranks: 8, dilation: 32}, cfg{app: "ccr", ranks: 32, dilation: 32},
		cfg{app: "ccr", ranks: 32, dilation: 32, args: map[string]float64{"ccr": 0.5}})
	for _, c := range cfgs {
		for _, topo := range []string{"1cluster", "2clusters"} {
			name := fmt.Sprintf("%s/ranks=%d/%s/d=%g", c.app, c.ranks, topo, c.dilation)
			if c.args != nil {
				name += fmt.Sprintf("/args=%v", c.args)
			}
			b.Run(name, func(b *testing.B) {
				app, err := Lookup(c.app)
				if err != nil {
					b.Fatal(err)
				}
				nominal, err := NominalArgs(app, c.ranks, c.args)
				if err != nil {
					b.Fatal(err)
				}
				rs := ranks(c.ranks)
				if topo == "2clusters" {
					rs = ranks(c.ranks, "a", "b")
				}
				// Time scale: about calWall seconds of wall time.
				k := max(1, float64(int(nominal.Seconds()*c.dilation/calWall())))
				p := Params{TimeScale: k, Args: c.args}
				for i := 0; i < b.N; i++ {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
					opts := []LocalOption{WithDilation(c.dilation)}
					if os.Getenv("KOALA_CAL_SLEEP") == "timer" {
						opts = append(opts, WithSleep(goSleep))
					}
					cpu0 := cpuTime()
					rep, err := RunLocalReport(ctx, app, rs, shaped(b, rs, c.dilation), p, opts...)
					cpu := cpuTime() - cpu0
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					scen := rep.Elapsed.Seconds() * k / c.dilation
					b.ReportMetric(scen, "scen-s")
					b.ReportMetric(nominal.Seconds(), "nominal-s")
					b.ReportMetric(scen/nominal.Seconds(), "x-nominal")
					b.ReportMetric(float64(rep.Messages())/rep.Elapsed.Seconds(), "msgs/s")
					b.ReportMetric(float64(rep.Bytes())/rep.Elapsed.Seconds()/1e6, "MB/s")
					b.ReportMetric(float64(rep.Result.Iterations), "iters")
					b.ReportMetric(cpu.Seconds()/rep.Elapsed.Seconds(), "cores")
					b.ReportMetric(float64(cpu.Microseconds())/float64(max(1, rep.Messages())), "cpu-us/msg")
				}
			})
		}
	}
}

func goSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// interOnly shapes only connections to other clusters.
type interOnly struct {
	own    string
	shaper netem.Egress
}

func (e interOnly) Wrap(c net.Conn, dst string) net.Conn {
	if dst == e.own {
		return c
	}
	return e.shaper.Wrap(c, dst)
}

// cpuTime is the CPU time (user + system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
