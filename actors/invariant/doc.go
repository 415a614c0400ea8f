// Package invariant counts the checks of a run's invariants and their
// violations: never more processors than a cluster has, never more than the
// threshold's cap, every malleable job within [min, max], FT always on a
// power of two, every mandatory shrink honoured at the first safe point.
// The malleability manager (actors/mmanager) and the malleable runners
// (actors/mrunner) check them as they go (Check) into one Stats per
// process; a failed check is also emitted as an "invariant_violation"
// event. The names are fixed strings so results can count them.
package invariant
