// Package srs holds the pure parts of the stop/restart library (SRS, SPEC
// §6): the distributions an application registers its data with (block,
// cyclic and block-cyclic, over a 1-D or 2-D process grid), the mapping of
// a global matrix index to (process, local index), the redistribution plan
// between two distributions (which bytes every old process sends to every
// new process, as compact index ranges), in-memory packing and unpacking of
// a local block into the plan's messages, and a checksum of a distributed
// matrix that does not depend on its distribution. Nothing here talks to
// the network or to a clock: the runtime moves the packed messages.
package srs
