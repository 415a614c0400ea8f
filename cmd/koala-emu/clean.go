package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/koala-emu/koala-emu/launch/docker"
	"github.com/koala-emu/koala-emu/netem/kernel"
	"github.com/koala-emu/koala-emu/netem/netns"
)

// cmdClean removes what a crashed run left: containers and networks labelled
// koala-emu.run, and the network namespaces of netns runs (root only).
func cmdClean(ctx context.Context, stdout io.Writer) error {
	var errs []error
	n, err := docker.Clean(ctx)
	switch {
	case errors.Is(err, docker.ErrDaemon):
		fmt.Fprintf(stdout, "docker: not reachable, nothing to clean there (%v)\n", err)
	case err != nil:
		errs = append(errs, fmt.Errorf("docker: %w", err))
	default:
		fmt.Fprintf(stdout, "docker: removed %d containers and networks labelled koala-emu.run\n", n)
	}
	if os.Geteuid() == 0 {
		removed, err := netns.Clean(netns.NamePrefix)
		if err != nil {
			errs = append(errs, fmt.Errorf("netns: %w", err))
		}
		fmt.Fprintf(stdout, "netns: removed %d namespaces named %s*\n", len(removed), netns.NamePrefix)
		links, err := kernel.CleanProbeLinks()
		if err != nil {
			errs = append(errs, fmt.Errorf("probe links: %w", err))
		}
		fmt.Fprintf(stdout, "kernel: removed %d scratch probe links\n", len(links))
	} else {
		fmt.Fprintln(stdout, "netns: not root, namespaces left alone")
	}
	return errors.Join(errs...)
}
