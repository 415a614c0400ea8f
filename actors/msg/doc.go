// Package msg is the wire contract of koala-emu: the protobuf messages every
// actor exchanges, in process and over protoactor remote (gRPC), with the
// generated code committed (regenerate with `make proto`) and small helpers
// to convert between Pid and protoactor's actor.PID. events.go names the
// kinds of Event the actors emit and the recorder (results) reads.
package msg
