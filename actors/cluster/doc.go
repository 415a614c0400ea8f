// Package cluster is the local resource manager of one emulated cluster (an
// SGE head node on DAS-3): space-shared nodes, exclusive claims by the KOALA
// processor claimer, an FCFS queue of local jobs that bypass KOALA and keep
// the background load inside its band, status reports to the information
// service, and the probe endpoint the information service measures links with.
package cluster
