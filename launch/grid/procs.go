package grid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// procs are actor hosts run as processes of this machine: the netns
// platform's, and the tests' platform's.
type procs struct {
	// log receives every host's output; nil discards it.
	log     io.Writer
	started atomic.Int64

	mu sync.Mutex
	m  map[string]*proc
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	out  *tailBuffer
}

// start starts host name's process; no host outlives the launcher
// (Pdeathsig).
func (ps *procs) start(name string, cmd *exec.Cmd) error {
	out := &tailBuffer{max: 4096, w: ps.log}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start host %s: %w", name, err)
	}
	h := &proc{cmd: cmd, done: make(chan struct{}), out: out}
	ps.mu.Lock()
	if ps.m == nil {
		ps.m = map[string]*proc{}
	}
	ps.m[name] = h
	ps.mu.Unlock()
	go func() {
		h.err = cmd.Wait()
		close(h.done)
	}()
	ps.started.Add(1)
	return nil
}

// Started is how many hosts have been started.
func (ps *procs) Started() int { return int(ps.started.Load()) }

// exited returns the hosts whose process ended, each with its exit status
// and the tail of its output.
func (ps *procs) exited() map[string]string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := map[string]string{}
	for n, h := range ps.m {
		select {
		case <-h.done:
			out[n] = fmt.Sprintf("exited (%v): %s", h.err, h.out.String())
		default:
		}
	}
	return out
}

// kill kills a host's process with SIGKILL, as a crash would.
func (ps *procs) kill(name string) error {
	ps.mu.Lock()
	h := ps.m[name]
	ps.mu.Unlock()
	if h == nil {
		return fmt.Errorf("no host %q", name)
	}
	return h.cmd.Process.Kill()
}

// stop stops every host with SIGTERM and waits for each, killing those
// still running when ctx ends. With strict, a host that exited with an
// error other than being killed is an error too.
func (ps *procs) stop(ctx context.Context, strict bool) error {
	ps.mu.Lock()
	hosts := ps.m
	ps.m = nil
	ps.mu.Unlock()
	names := make([]string, 0, len(hosts))
	for n, h := range hosts {
		names = append(names, n)
		_ = h.cmd.Process.Signal(syscall.SIGTERM) // fails only for a process already gone
	}
	sort.Strings(names)
	var errs []error
	for _, n := range names {
		h := hosts[n]
		select {
		case <-h.done:
			var ee *exec.ExitError
			if strict && h.err != nil && !(errors.As(h.err, &ee) && ee.ProcessState.String() == "signal: killed") {
				errs = append(errs, fmt.Errorf("host %s: %w", n, h.err))
			}
		case <-ctx.Done():
			_ = h.cmd.Process.Kill()
			<-h.done
			errs = append(errs, fmt.Errorf("host %s did not stop: %w", n, ctx.Err()))
		}
	}
	return errors.Join(errs...)
}

// tailBuffer keeps the last max bytes written and copies everything to w.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
	w   io.Writer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.w != nil {
		_, _ = t.w.Write(p)
	}
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// prepareStart is what every platform's Start does first: make room in the
// kernel's neighbour tables for n hosts (backend names the platform in
// messages) and encode the Grid for the hosts' environment.
func prepareStart(backend string, n int, tune bool, log io.Writer, g *Grid) (string, error) {
	if log == nil {
		log = io.Discard
	}
	if err := EnsureNeighbourRoom(backend, n+1, tune, log); err != nil {
		return "", err
	}
	return g.Encode()
}
