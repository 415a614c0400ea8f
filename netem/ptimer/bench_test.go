package ptimer

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// load keeps n goroutines busy with a mix of CPU work, allocation and short
// channel hand-offs until stop is closed.
func load(n int, stop <-chan struct{}) *sync.WaitGroup { return loadDuty(n, 0, stop) }

// loadDuty is load with a pause of idle per ~100 µs of work (0: none).
func loadDuty(n int, idle time.Duration, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sink []byte
			x := uint64(i + 1)
			for {
				select {
				case <-stop:
					_ = sink
					return
				default:
				}
				for range 20000 {
					x = x*6364136223846793005 + 1442695040888963407
				}
				sink = make([]byte, 4096+int(x%4096))
				if idle > 0 {
					time.Sleep(idle)
				}
			}
		}()
	}
	return &wg
}

func reportStats(b *testing.B, prefix string, s Stats) {
	b.ReportMetric(float64(s.P50)/1e3, prefix+"p50-us")
	b.ReportMetric(float64(s.P99)/1e3, prefix+"p99-us")
	b.ReportMetric(float64(s.Max)/1e3, prefix+"max-us")
}

func benchAt(b *testing.B, loaders int, o Options) { benchAtDuty(b, loaders, 0, o) }

func benchAtDuty(b *testing.B, loaders int, idle time.Duration, o Options) {
	l := NewWithOptions(o)
	defer l.Close()
	stop := make(chan struct{})
	wg := loadDuty(loaders, idle, stop)
	defer func() { close(stop); wg.Wait() }()
	var fired atomic.Int64
	done := make(chan struct{}, 1)
	t0 := time.Now()
	b.ResetTimer()
	for range b.N {
		d := time.Duration(30+rand.IntN(970)) * time.Microsecond
		l.At(time.Now().Add(d), func() {
			fired.Add(1)
			done <- struct{}{}
		})
		<-done
	}
	b.StopTimer()
	el := time.Since(t0)
	reportStats(b, "late-", l.Lateness())
	reportStats(b, "wake-", l.WakeOvershoot())
	b.ReportMetric(float64(l.Spin())/1e3, "spin-us")
	b.ReportMetric(100*float64(l.SpinTime())/float64(el), "spin-%")
}

// BenchmarkAtLateness: one callback at a time, 30 µs to 1 ms ahead, with
// the Default line's options (SCHED_FIFO when permitted).
func BenchmarkAtLateness(b *testing.B) { benchAt(b, 0, Options{Realtime: true}) }

// BenchmarkAtLatenessNoRT: the same on a SCHED_OTHER thread.
func BenchmarkAtLatenessNoRT(b *testing.B) { benchAt(b, 0, Options{}) }

// BenchmarkAtLatenessLoaded: GOMAXPROCS goroutines of this process busy
// all the time (the Go scheduler has no P to spare: the worst case).
func BenchmarkAtLatenessLoaded(b *testing.B) {
	benchAt(b, runtime.GOMAXPROCS(0), Options{Realtime: true})
}

// BenchmarkSleepLateness: a goroutine's own wake-up through SleepUntil
// (includes the Go scheduler's hand-off after the release).
func BenchmarkSleepLateness(b *testing.B) { benchSleep(b, 0) }

// BenchmarkSleepLatenessLoaded: the same with GOMAXPROCS busy goroutines.
func BenchmarkSleepLatenessLoaded(b *testing.B) { benchSleep(b, runtime.GOMAXPROCS(0)) }

func benchSleep(b *testing.B, loaders int) {
	l := NewWithOptions(Options{Realtime: true})
	defer l.Close()
	stop := make(chan struct{})
	wg := load(loaders, stop)
	defer func() { close(stop); wg.Wait() }()
	var h Histogram
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		dl := time.Now().Add(time.Duration(30+rand.IntN(970)) * time.Microsecond)
		if err := l.SleepUntil(ctx, dl); err != nil {
			b.Fatal(err)
		}
		h.Record(time.Since(dl))
	}
	b.StopTimer()
	reportStats(b, "resume-", h.Stats())
	reportStats(b, "late-", l.Lateness())
}

// BenchmarkGoTimerLateness is the reference: time.Sleep for the same waits.
func BenchmarkGoTimerLateness(b *testing.B) {
	var h Histogram
	for range b.N {
		d := time.Duration(30+rand.IntN(970)) * time.Microsecond
		dl := time.Now().Add(d)
		time.Sleep(d)
		h.Record(time.Since(dl))
	}
	reportStats(b, "late-", h.Stats())
}

// BenchmarkAtLatenessHalfLoad: GOMAXPROCS goroutines busy about half the
// time.
func BenchmarkAtLatenessHalfLoad(b *testing.B) {
	benchAtDuty(b, runtime.GOMAXPROCS(0), 150*time.Microsecond, Options{Realtime: true})
}
