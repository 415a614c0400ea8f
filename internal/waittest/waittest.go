package waittest

import (
	"runtime"
	"testing"
	"time"
)

// Poll is how long Until sleeps between two calls of the condition.
const Poll = time.Millisecond

// stackBytes caps the goroutine dump of a failure.
const stackBytes = 64 << 10

// Until calls cond every Poll until it returns true. If within passes
// first, it fails t with Fatalf (so it returns only once cond held), naming
// what it waited for and dumping every goroutine's stack: what is blocked,
// or what was left running. cond runs on the test's goroutine and must not
// call t.FailNow.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			buf := make([]byte, stackBytes)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("timed out after %v waiting for %s; %d goroutines:\n%s", within, what, runtime.NumGoroutine(), buf)
		}
		time.Sleep(Poll)
	}
}
