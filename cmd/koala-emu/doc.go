// Command koala-emu is the one binary of the emulator: run a scenario, check
// one, calibrate its links, run the cluster-count study, clean up after a
// crashed run, and (on the netns and docker backends) serve as every host's
// entrypoint (the hidden node command).
//
// The commands are github.com/spf13/cobra commands, one file each; they
// parse flags, call the launch layer (its backend registry, Check and
// Clean) and print: human text, or with --json one object on stdout (see
// docs/cli.md). Exit codes: 0 done, 1 failed, 2 wrong command line.
package main
