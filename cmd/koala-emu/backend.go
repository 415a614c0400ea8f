package main

import (
	"fmt"
	"strings"

	"github.com/koala-emu/koala-emu/launch"
)

// The backends come from launch's registry (launch.Backends); the app
// holds the list so that tests can give their own. Nothing in cmd switches
// on a backend's name.

// defaultBackend is the --backend of run, calibrate and study.
const defaultBackend = "inproc"

// lookupBackend finds a backend by name; an unknown name is a usage error
// listing the known ones.
func (a *app) lookupBackend(name string) (launch.Backend, error) {
	for _, b := range a.backends {
		if b.Name() == name {
			return b, nil
		}
	}
	return nil, usagef("--backend %q: unknown backend (known: %s%s)", name, strings.Join(a.backendNames(), ", "), launch.LeftOut)
}

func (a *app) backendNames() []string {
	ns := make([]string, len(a.backends))
	for i, b := range a.backends {
		ns[i] = b.Name()
	}
	return ns
}

// backendHelp is the --backend flag's help: the names.
func (a *app) backendHelp() string {
	return strings.Join(a.backendNames(), ", ") + " (see Backends above)"
}

// backendsSection is the Backends section of a command's long help: every
// backend with what its capabilities say.
func (a *app) backendsSection() string {
	var sb strings.Builder
	sb.WriteString("\n\nBackends:\n")
	for _, b := range a.backends {
		fmt.Fprintf(&sb, "  %-8s %s\n", b.Name(), describe(b.Capabilities()))
	}
	return strings.TrimSuffix(sb.String(), "\n")
}

// describe is a backend's capabilities in a few words.
func describe(c launch.Capabilities) string {
	var parts []string
	if c.Isolation {
		parts = append(parts, "every host its own network stack")
	} else {
		parts = append(parts, "every actor in this process")
	}
	switch {
	case c.Simulated:
		parts = append(parts, "virtual clock; links modelled, not shaped")
	case c.KernelShaping:
		parts = append(parts, "links shaped in the kernel")
	default:
		parts = append(parts, "links shaped in userspace")
	}
	if len(c.Shapers) > 0 {
		parts = append(parts, "shapers "+strings.Join(c.Shapers, ", "))
	}
	if !c.Malleability {
		parts = append(parts, "no malleability")
	}
	if len(c.Faults) > 0 {
		parts = append(parts, "faults "+strings.Join(c.Faults, ", "))
	}
	if c.NeedsRoot {
		parts = append(parts, "needs root")
	}
	if c.NeedsDocker {
		parts = append(parts, "needs Docker")
	}
	return strings.Join(parts, "; ")
}
