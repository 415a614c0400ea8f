// Command koala-emu is the one binary of the emulator: run a scenario, check
// one, calibrate its links, run the cluster-count study, clean up after a
// crashed run, and (on the docker backend) serve as every container's
// entrypoint.
package main
