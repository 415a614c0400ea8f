// Package actors holds what every koala-emu actor kind shares: the Env an
// actor is built with (clock, recorder, root context) and the event emitter.
// The actor kinds live in the sub-packages scheduler, cluster, node, runner
// and kis; their decisions are pure policy calls in actors/policy.
package actors
