package grid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/koala-emu/koala-emu/actors/msg"
	"github.com/koala-emu/koala-emu/launch/membership"
	"github.com/koala-emu/koala-emu/launch/wiring"
	"github.com/koala-emu/koala-emu/netem"
	"github.com/koala-emu/koala-emu/netem/ptimer"
)

// CalibrateRealtime is the real-time budget per second of each node
// container of a docker calibration (DockerOptions.Realtime); a negative
// DockerOptions.Realtime turns it off.
const CalibrateRealtime = 115 * time.Millisecond

// CalibrateOptions configures Calibrate.
type CalibrateOptions struct {
	// Platform starts the hosts; nil means a DockerPlatform with Docker.
	Platform Platform
	Docker   DockerOptions
	PingPong netem.PingPongOptions
	// Dilation applied to every link (<= 1: none).
	Dilation float64
	// Attempts is how many times a pair is measured at most (a pair that
	// fails, or whose p99 release lateness is above
	// netem.MaxReleaseLateness, is measured again and the best attempt is
	// kept); default 3.
	Attempts int
	// Log receives progress lines; nil discards.
	Log io.Writer
}

// Calibrate measures every unordered cluster pair of m (a cluster with
// itself included, unavailable pairs skipped) between containers: two node
// containers per cluster, each shaping its own egress with the mechanism
// want selects (auto, netem, htb, userspace; an explicit one that cannot run
// in the containers fails naming what is missing). Like the netns
// calibration it first measures the unshaped floor and, for htb, the delay
// line's own overhead, which the installed model subtracts. Every container
// and the network are removed before it returns.
func Calibrate(ctx context.Context, m netem.Matrix, want string, opts CalibrateOptions) (_ []netem.CalibrationRow, _ netem.CalibrationSummary, info ShapeInfo, err error) {
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	opts.Log = logw
	if len(m.Clusters) == 0 {
		return nil, netem.CalibrationSummary{}, info, errors.New("grid: calibrate: no clusters")
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 3
	}
	d := opts.Dilation
	if d <= 1 {
		d = 1
	}
	// Eight containers: each delay line gets real-time priority, as the
	// netns calibration's do on the host.
	plat := orDocker(opts.Platform, opts.Docker, logw, CalibrateRealtime)
	g := &Grid{Spec: wiring.Spec{Links: m, TimeScale: 1, Dilation: d}}
	var hosts []HostSpec
	for _, c := range m.Clusters {
		g.Clusters = append(g.Clusters, Cluster{Name: c, Nodes: 2, Processors: 1, Speed: 1})
		for i := 0; i < 2; i++ {
			hosts = append(hosts, HostSpec{Name: NodeName(c, i), Role: membership.RoleNode, Cluster: c})
		}
	}
	fmt.Fprintf(logw, "calibrate: %d clusters, %d node hosts (%s)\n", len(m.Clusters), len(hosts), backendOf(plat))
	if hp, ok := plat.(hostPlanner); ok {
		hp.planHosts(hosts)
	}
	l, err := newLauncher(ctx, plat, g, logw)
	if err != nil {
		return nil, netem.CalibrationSummary{}, info, err
	}
	defer func() {
		if cerr := l.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if _, err := l.startHosts(ctx, hosts, DefaultStartStall); err != nil {
		return nil, netem.CalibrationSummary{}, info, err
	}
	nodes := l.hostsByRole(membership.RoleNode)
	a, b := pairFor(nodes)
	if info, err = l.model(ctx, want, 0, a, b, opts.PingPong, m.MaxLatency(d)); err != nil {
		return nil, netem.CalibrationSummary{}, info, err
	}
	fmt.Fprintf(logw, "mechanism %s: %s\n", info.Mechanism, info.Reason)
	fmt.Fprintf(logw, "floor: one-way %v, 1 MB ping-pong %.0f MB/s unshaped\n", info.Floor, info.FloorBandwidth/1e6)
	if info.Mechanism == "htb" {
		fmt.Fprintf(logw, "delay line overhead (delay:overhead one way): %v\n", info.Overhead)
	}
	if err := l.shapeAll(ctx, &info, nodes); err != nil {
		return nil, netem.CalibrationSummary{}, info, err
	}
	rows, err := l.calibratePairs(ctx, m, d, info, opts, nodes)
	if err != nil {
		return rows, netem.CalibrationSummary{}, info, err
	}
	return rows, netem.SummarizeCalibration(rows), info, nil
}

// calibratePairs measures every unordered available cluster pair between
// the first node of one cluster and the second of the other, keeping the
// best of opts.Attempts.
func (l *launcher) calibratePairs(ctx context.Context, m netem.Matrix, d float64, info ShapeInfo, opts CalibrateOptions,
	nodes []membership.Member) ([]netem.CalibrationRow, error) {
	logw := opts.Log
	byName := map[string]membership.Member{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	var rows []netem.CalibrationRow
	for i, src := range m.Clusters {
		for j := i; j < len(m.Clusters); j++ {
			dst := m.Clusters[j]
			target := m.Links[i][j].Dilate(d)
			if target.Unavailable {
				continue
			}
			ha, hb := byName[NodeName(src, 0)], byName[NodeName(dst, 1)]
			row, err := netem.BestOf(opts.Attempts, func(int) (netem.CalibrationRow, error) {
				r, err := l.calibratePair(ctx, ha, hb, target, info, opts.PingPong)
				r.Src, r.Dst = src, dst
				return r, err
			})
			if err != nil {
				return rows, fmt.Errorf("grid: calibrate %s-%s: %w", src, dst, err)
			}
			fmt.Fprintf(logw, "%s-%s: %.1f MB/s %v -> %s (%d tries)\n", src, dst, row.Measured.Bandwidth/1e6, row.Measured.Latency, row.Verdict, row.Attempts)
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// calibratePair measures one ping-pong from a to b with the shaping in
// effect and gathers both delay lines' statistics for it.
func (l *launcher) calibratePair(ctx context.Context, a, b membership.Member, target netem.Link, info ShapeInfo, pp netem.PingPongOptions) (netem.CalibrationRow, error) {
	stats := func(reset bool) ([]*msg.GridLineStatsResult, error) {
		var out []*msg.GridLineStatsResult
		for _, h := range []membership.Member{a, b} {
			s, err := askFor[*msg.GridLineStatsResult](ctx, l, h, &msg.GridLineStats{ResetLateness: reset}, 30*time.Second)
			if err != nil {
				return nil, fmt.Errorf("%s: delay line: %w", h.Name, err)
			}
			out = append(out, s)
		}
		return out, nil
	}
	before, err := stats(true)
	if err != nil {
		return netem.CalibrationRow{}, err
	}
	res, err := l.pingPong(ctx, a, b, pp)
	if err != nil {
		return netem.CalibrationRow{}, err
	}
	after, err := stats(false)
	if err != nil {
		return netem.CalibrationRow{}, err
	}
	var late ptimer.Stats
	var drops, released int64
	for i := range after {
		drops += after[i].Drops - before[i].Drops
		released += after[i].Released - before[i].Released
		late.Count += after[i].Count
		late.P50 = max(late.P50, time.Duration(after[i].P50Ns))
		late.P99 = max(late.P99, time.Duration(after[i].P99Ns))
		late.Max = max(late.Max, time.Duration(after[i].MaxNs))
	}
	v, bwErr, latErr := netem.Verdict(target, res, info.Floor)
	return netem.CalibrationRow{Target: target, Measured: res, BwErr: bwErr, LatErr: latErr, Mechanism: info.Mechanism,
		Verdict: v, Segments: released, Drops: drops, Lateness: late, Baseline: info.Floor}, nil
}
