package kernel

// LineThreads returns the number of running delay-line threads.
func LineThreads() int64 { return liveThreads.Load() }
