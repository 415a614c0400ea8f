// Package waittest holds the one "wait until" of the project's tests:
// Until polls a condition that other goroutines make true (an actor
// started, a timer fired, goroutines gone) and fails the test when it does
// not hold within a deadline. It is test support only; no production code
// imports it.
package waittest
