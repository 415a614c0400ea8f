package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Container is one started container of a run.
type Container struct {
	// Name is the name within the run (ContainerSpec.Name).
	Name string
	// DockerName is the Docker container name.
	DockerName string
	// ID is the Docker container ID.
	ID string
	// Role and Cluster are copied from the spec.
	Role, Cluster string
	// IP is the container's fixed address on the run network.
	IP netip.Addr

	run *Run
}

// Kill sends SIGKILL to the container's process, as a crash would. The
// container stays (exited) until the run is closed.
func (c *Container) Kill(ctx context.Context) error {
	if _, err := c.run.cli.ContainerKill(ctx, c.ID, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("docker backend: kill %s: %w", c.DockerName, err)
	}
	return nil
}

// Running reports whether the container's process is running.
func (c *Container) Running(ctx context.Context) (bool, error) {
	res, err := c.run.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if err != nil {
		return false, fmt.Errorf("docker backend: inspect %s: %w", c.DockerName, err)
	}
	return res.Container.State != nil && res.Container.State.Running, nil
}

// Inspect returns Docker's view of the container.
func (c *Container) Inspect(ctx context.Context) (container.InspectResponse, error) {
	res, err := c.run.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if err != nil {
		return container.InspectResponse{}, fmt.Errorf("docker backend: inspect %s: %w", c.DockerName, err)
	}
	return res.Container, nil
}

// Stats is a one-shot resource sample of a container.
type Stats struct {
	// Memory is the memory in use without reclaimable page cache (what
	// `docker stats` shows), in bytes.
	Memory uint64
	// MemoryRaw is the cgroup's total usage including page cache, in bytes.
	MemoryRaw uint64
	// PIDs is the number of processes and threads.
	PIDs uint64
}

// Stats samples the container's memory use. The daemon answers at its next
// collection round, up to about a second later; sample many containers with
// Run.Stats, which asks for all of them at once.
func (c *Container) Stats(ctx context.Context) (Stats, error) {
	res, err := c.run.cli.ContainerStats(ctx, c.ID, client.ContainerStatsOptions{})
	if err != nil {
		return Stats{}, fmt.Errorf("docker backend: stats of %s: %w", c.DockerName, err)
	}
	defer res.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
		return Stats{}, fmt.Errorf("docker backend: stats of %s: %w", c.DockerName, err)
	}
	return Stats{Memory: memoryInUse(s.MemoryStats), MemoryRaw: s.MemoryStats.Usage, PIDs: s.PidsStats.Current}, nil
}

// memoryInUse subtracts reclaimable file cache from the usage the way the
// Docker CLI does: total_inactive_file on cgroup v1, inactive_file on v2.
func memoryInUse(m container.MemoryStats) uint64 {
	for _, key := range []string{"total_inactive_file", "inactive_file"} {
		if v, ok := m.Stats[key]; ok {
			if v < m.Usage {
				return m.Usage - v
			}
			return m.Usage
		}
	}
	return m.Usage
}

// Logs returns the container's output so far (stdout and stderr merged).
func (c *Container) Logs(ctx context.Context) (string, error) {
	rc, err := c.run.cli.ContainerLogs(ctx, c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return "", fmt.Errorf("docker backend: logs of %s: %w", c.DockerName, err)
	}
	defer rc.Close()
	var b strings.Builder
	if _, err := stdcopy.StdCopy(&b, &b, rc); err != nil {
		return b.String(), fmt.Errorf("docker backend: logs of %s: %w", c.DockerName, err)
	}
	return b.String(), nil
}

// logTail returns the last n lines of output, or "" if unavailable.
func (c *Container) logTail(ctx context.Context, n int) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := c.Logs(ctx)
	if err != nil && out == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tcpReady waits until addr accepts TCP connections, failing early if the
// container stops.
type tcpReady struct {
	addr    string
	timeout time.Duration
}

var _ wait.Strategy = (*tcpReady)(nil)

func (t *tcpReady) String() string { return "TCP " + t.addr }

func (t *tcpReady) WaitUntilReady(ctx context.Context, target wait.StrategyTarget) error {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var d net.Dialer
	var last error
	for {
		dctx, dcancel := context.WithTimeout(ctx, time.Second)
		conn, err := d.DialContext(dctx, "tcp", t.addr)
		dcancel()
		if err == nil {
			return conn.Close()
		}
		last = err
		if st, err := target.State(ctx); err == nil && st != nil && !st.Running {
			return fmt.Errorf("container stopped (exit code %d) before %s accepted connections", st.ExitCode, t.addr)
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("%s not accepting connections: %w", t.addr, last), ctx.Err())
		case <-tick.C:
		}
	}
}
