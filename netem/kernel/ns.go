package kernel

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// inNamespace runs fn on a fresh goroutine locked to its OS thread, with
// the thread switched into the namespace nsFd refers to. The thread is
// restored afterwards, or discarded by the runtime when that fails.
//
// When nsFd is the calling thread's own namespace, fn runs right here
// without switching: setns(2) needs CAP_SYS_ADMIN even into the namespace
// a thread is already in, and a container given only CAP_NET_ADMIN (the
// docker backend's node containers) must still shape its own egress.
func inNamespace(nsFd int, fn func() error) error {
	if sameNamespace(nsFd) {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			errc <- fmt.Errorf("namespace: current: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Setns(nsFd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("namespace: enter: %w", err)
			return
		}
		ferr := fn()
		if err := vnetns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("namespace: restore: %w", err))
			return // the thread stays locked and is discarded
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// currentNamespace returns an open handle to the calling thread's network
// namespace. Callers that switched namespaces must have locked the thread.
func currentNamespace() (vnetns.NsHandle, error) {
	h, err := vnetns.Get()
	if err != nil {
		return -1, fmt.Errorf("namespace: current: %w", err)
	}
	return h, nil
}

// sameNamespace reports whether nsFd refers to the calling thread's network
// namespace (false when that cannot be told).
func sameNamespace(nsFd int) bool {
	cur, err := vnetns.Get()
	if err != nil {
		return false
	}
	defer cur.Close()
	return vnetns.NsHandle(nsFd).Equal(cur)
}

// handleAt is netlink.NewHandleAt(ns) without the namespace switch when ns
// is the calling thread's own namespace (see inNamespace).
func handleAt(ns vnetns.NsHandle) (*netlink.Handle, error) {
	if sameNamespace(int(ns)) {
		return netlink.NewHandle()
	}
	return netlink.NewHandleAt(ns)
}
