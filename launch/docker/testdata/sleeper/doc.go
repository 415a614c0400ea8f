// Command sleeper is a tiny static program used as the entrypoint of test
// containers of launch/docker (a FROM scratch image has no shell). It
// prints its IPv4 addresses, listens on TCP, prints the ready line, then
// optionally dials peers and opens /dev/net/tun, and reports each result
// as a log line. It runs until killed.
package main
