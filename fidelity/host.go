package fidelity

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Host is what the launcher saw of the host during a run.
type Host struct {
	// Go scheduler latency of the launcher's process (time goroutines
	// waited runnable), from runtime/metrics, over the run.
	SchedP99Ms float64 `json:"sched_latency_p99_ms"`
	SchedMaxMs float64 `json:"sched_latency_max_ms"`
	// The garbage collector over the run, from runtime/metrics: its share
	// of the process's CPU time (background marking and assists take a
	// processor from the goroutines that shape and compute, which shows as
	// scheduler latency), its cycles, and its stop-the-world pauses.
	GCCPUPct     float64 `json:"gc_cpu_pct"`
	GCCycles     uint64  `json:"gc_cycles"`
	GCPauseP99Ms float64 `json:"gc_pause_p99_ms"`
	// CPU use of the whole machine (every process, containers included),
	// sampled each second from /proc/stat.
	CPUMeanPct float64 `json:"cpu_mean_pct"`
	CPUMaxPct  float64 `json:"cpu_max_pct"`
	// SaturatedPct is the share of samples with the CPU at 95 % or more.
	SaturatedPct float64 `json:"cpu_saturated_pct"`
	Samples      int     `json:"samples"`
}

const (
	schedMetric   = "/sched/latencies:seconds"
	gcPauseMetric = "/sched/pauses/total/gc:seconds"
	gcCPUMetric   = "/cpu/classes/gc/total:cpu-seconds"
	allCPUMetric  = "/cpu/classes/total:cpu-seconds"
	gcCycleMetric = "/gc/cycles/total:gc-cycles"
)

// HostSampler samples the host until Stop.
type HostSampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	first  *metrics.Float64Histogram
	gc     gcSample

	mu   sync.Mutex
	cpus []float64
}

// StartHost starts sampling every period (default 1 s).
func StartHost(period time.Duration) *HostSampler {
	if period <= 0 {
		period = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &HostSampler{cancel: cancel, done: make(chan struct{}), first: schedHist(), gc: readGC()}
	go h.loop(ctx, period)
	return h
}

func (h *HostSampler) loop(ctx context.Context, period time.Duration) {
	defer close(h.done)
	t := time.NewTicker(period)
	defer t.Stop()
	prev, err := readCPU()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur, cerr := readCPU()
		if err == nil && cerr == nil {
			if busy, ok := prev.busySince(cur); ok {
				h.mu.Lock()
				h.cpus = append(h.cpus, busy)
				h.mu.Unlock()
			}
		}
		prev, err = cur, cerr
	}
}

// Stop ends the sampling and returns the figures.
func (h *HostSampler) Stop() *Host {
	h.cancel()
	<-h.done
	out := &Host{}
	if last := schedHist(); h.first != nil && last != nil {
		out.SchedP99Ms, out.SchedMaxMs = histDiffQuantile(h.first, last, 0.99)
	}
	h.gc.since(readGC(), out)
	h.mu.Lock()
	defer h.mu.Unlock()
	out.Samples = len(h.cpus)
	sat := 0
	for _, c := range h.cpus {
		out.CPUMeanPct += c
		out.CPUMaxPct = math.Max(out.CPUMaxPct, c)
		if c >= 95 {
			sat++
		}
	}
	if n := len(h.cpus); n > 0 {
		out.CPUMeanPct /= float64(n)
		out.SaturatedPct = 100 * float64(sat) / float64(n)
	}
	return out
}

func schedHist() *metrics.Float64Histogram { return readHist(schedMetric) }

// readHist reads a histogram of runtime/metrics (a copy; nil when the
// runtime does not have it).
func readHist(name string) *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	h := s[0].Value.Float64Histogram()
	return &metrics.Float64Histogram{Counts: append([]uint64(nil), h.Counts...), Buckets: append([]float64(nil), h.Buckets...)}
}

// gcSample is the collector's counters at one moment.
type gcSample struct {
	gcCPU, allCPU float64
	cycles        uint64
	pauses        *metrics.Float64Histogram
}

func readGC() gcSample {
	s := []metrics.Sample{{Name: gcCPUMetric}, {Name: allCPUMetric}, {Name: gcCycleMetric}}
	metrics.Read(s)
	var g gcSample
	if s[0].Value.Kind() == metrics.KindFloat64 && s[1].Value.Kind() == metrics.KindFloat64 {
		g.gcCPU, g.allCPU = s[0].Value.Float64(), s[1].Value.Float64()
	}
	if s[2].Value.Kind() == metrics.KindUint64 {
		g.cycles = s[2].Value.Uint64()
	}
	g.pauses = readHist(gcPauseMetric)
	return g
}

// since writes into out what the collector did between g and later.
func (g gcSample) since(later gcSample, out *Host) {
	if all := later.allCPU - g.allCPU; all > 0 {
		out.GCCPUPct = 100 * (later.gcCPU - g.gcCPU) / all
	}
	out.GCCycles = later.cycles - g.cycles
	if g.pauses != nil && later.pauses != nil {
		out.GCPauseP99Ms, _ = histDiffQuantile(g.pauses, later.pauses, 0.99)
	}
}

// histDiffQuantile returns quantile q and the largest non-empty bucket of
// the values added between a and b (same buckets), in milliseconds.
func histDiffQuantile(a, b *metrics.Float64Histogram, q float64) (p, mx float64) {
	if len(a.Counts) != len(b.Counts) {
		return 0, 0
	}
	diff := make([]uint64, len(b.Counts))
	var n uint64
	for i := range b.Counts {
		diff[i] = b.Counts[i] - a.Counts[i]
		n += diff[i]
	}
	if n == 0 {
		return 0, 0
	}
	edge := func(i int) float64 {
		e := b.Buckets[i+1]
		if math.IsInf(e, 1) {
			e = b.Buckets[i]
		}
		return 1e3 * e
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	p = -1
	for i, c := range diff {
		seen += c
		if p < 0 && seen >= rank {
			p = edge(i)
		}
		if c > 0 {
			mx = edge(i)
		}
	}
	return p, mx
}

type cpuTimes struct{ busy, total uint64 }

func (a cpuTimes) busySince(b cpuTimes) (float64, bool) {
	if b.total <= a.total {
		return 0, false
	}
	return 100 * float64(b.busy-a.busy) / float64(b.total-a.total), true
}

// MachineCPU returns the machine's busy and total CPU time since boot, in
// clock ticks over every CPU (/proc/stat; steal is busy).
func MachineCPU() (busy, total uint64, err error) {
	t, err := readCPU()
	return t.busy, t.total, err
}

// OthersShare is the share of the machine's CPU (0-1) that processes
// other than this one used over an interval: the machine's busy share of
// its CPU time (busy and total in ticks, MachineCPU) less this process's
// CPU time (self) over ncpu CPUs for wall.
func OthersShare(busy, total uint64, self, wall time.Duration, ncpu int) float64 {
	if total == 0 {
		return 0
	}
	own := 0.0
	if wall > 0 && ncpu > 0 {
		own = self.Seconds() / (wall.Seconds() * float64(ncpu))
	}
	return math.Min(1, math.Max(0, float64(busy)/float64(total)-own))
}

// readCPU reads the aggregate cpu line of /proc/stat.
func readCPU() (cpuTimes, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return cpuTimes{}, fmt.Errorf("fidelity: /proc/stat is empty")
	}
	return parseCPU(sc.Text())
}

// parseCPU parses "cpu user nice system idle iowait irq softirq steal ...":
// idle and iowait are not busy; steal is (the hypervisor took the CPU).
func parseCPU(line string) (cpuTimes, error) {
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("fidelity: unexpected /proc/stat line %q", line)
	}
	var t cpuTimes
	for i, s := range f[1:] {
		if i >= 8 { // guest times are already in user and nice
			break
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("fidelity: /proc/stat field %d: %w", i+1, err)
		}
		t.total += v
		if i != 3 && i != 4 {
			t.busy += v
		}
	}
	return t, nil
}
