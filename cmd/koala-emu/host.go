package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/koala-emu/koala-emu/fidelity"
	"github.com/koala-emu/koala-emu/fidelity/hostprobe"
	"github.com/koala-emu/koala-emu/launch"
)

func newHostCmd(a *app) *cobra.Command {
	var (
		backend string
		refresh bool
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "host",
		Short: "show what this machine carries in real time (the capacity `dilation: auto` uses)",
		Long: `host shows the capacity of this machine for a backend: messages and payload bytes per
second through the backend's shaper, and the delay line's wake-up lateness. The figures are
measured by a short probe (about 10 s in process for inproc; for netns and docker about a minute
or two through the kernel shaper between 32 network namespaces, as root) the first time a run needs them and kept per machine
and backend; --refresh measures again.`,
		Example: `  koala-emu host
  koala-emu host --refresh --json`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, measured, err := launch.HostCapacity(cmd.Context(), backend, refresh)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.stdout, hostOutput{Capacity: c, Measured: measured, Headroom: fidelity.Headroom, FloorShare: fidelity.FloorShare})
			}
			path, _ := hostprobe.CacheFile(backend)
			how := "kept from " + c.Measured.Local().Format(time.RFC3339)
			switch {
			case measured && c.Busy():
				how = "measured now, not kept: the machine was busy"
			case measured:
				how = "measured now"
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "backend\t%s (%s; %s)\n", c.Backend, how, path)
			fmt.Fprintf(tw, "machine\t%s\n", c.Machine)
			if c.Path != "" {
				fmt.Fprintf(tw, "through\t%s\n", c.Path)
			}
			fmt.Fprintf(tw, "messages\t%.0f per second\n", c.MsgsPerSec)
			fmt.Fprintf(tw, "bytes\t%.0f MB per second\n", c.BytesPerSec/1e6)
			fmt.Fprintf(tw, "lateness floor\t%s (p99 of the delay line's wake-ups)\n", c.Floor)
			if c.BurstPerMsg > 0 {
				fmt.Fprintf(tw, "burst\t%s per message of a lock-step exchange (p99 lateness over its messages)\n", c.BurstPerMsg)
			}
			fmt.Fprintf(tw, "others' CPU\t%.0f %% of the machine during the probe (figures measured above %.0f %% are not kept)\n",
				100*c.OthersCPU, 100*fidelity.MaxOthersCPU)
			fmt.Fprintf(tw, "auto dilation\tkeeps a run's demand under %.0f%% of these rates and the floor under %.0f%% of its smallest latency\n",
				100*fidelity.Headroom, 100*fidelity.FloorShare)
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&backend, "backend", "inproc", "the backend whose capacity to show: "+names(a.backendNames()))
	cmd.Flags().BoolVar(&refresh, "refresh", false, "measure again instead of using the kept figures")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the figures as JSON")
	return cmd
}

// hostOutput is host --json.
type hostOutput struct {
	Capacity   fidelity.Capacity `json:"capacity"`
	Measured   bool              `json:"measured_now"`
	Headroom   float64           `json:"headroom"`
	FloorShare float64           `json:"floor_share"`
}
