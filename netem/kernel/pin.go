package kernel

import _ "unsafe" // go:linkname

// procPin and procUnpin make the calling goroutine non-preemptible and
// preemptible again (the runtime's own pair, used by sync/atomic and
// sync.Pool). While pinned, the goroutine must not block: a park with the
// pin held is a fatal runtime error. See lineThread for why the delay
// line's thread pins itself.

//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()
