// Package swf reads job traces in the Standard Workload Format (SWF) of the
// Parallel Workloads Archive, plain or gzip-compressed, so that a scenario can
// replay a real batch log (SPEC §5).
//
// A Reader parses the "; Key: value" header into a Header, then streams the
// 18-field job lines as Jobs: every trace value is kept as written (Unknown,
// -1, marks a value the log does not know) next to the values a replay needs
// (submit time rebased to the window start, processor count, run time and
// walltime). Jobs that cannot be replayed are skipped and counted by Reason
// in Stats, never silently dropped. A malformed line is a *ParseError that
// names the file, the line and the field. ReadFile reads a whole file.
//
// Jobs come in file order; SWF sorts job lines by submit time, and the
// reader does not check it. The Grid Workloads Archive format is not read.
package swf
