// Package netnstest holds test helpers for code that builds network
// namespaces, veths and nftables rules: skipping when not root, building a
// topology that is removed when the test ends, and asserting that nothing
// of the project is left behind.
package netnstest
