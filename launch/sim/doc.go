// Package sim is what the sim backend (launch: --backend sim) puts in place
// of real ranks and real time: a performance model of jobs' executions
// (Model), learnt from emulated runs into a model file (File, Fit; the
// file measured on inproc is embedded: Shipped), a node actor that sleeps the predicted time instead of running
// ranks (NodeProps), a prober that reads the link matrix instead of
// measuring (Prober), and the runtime that puts every actor of a
// simulation on a virtual clock (Runtime). The scheduler, information
// service, cluster managers and runners are the same actors, built by
// launch/wiring, as on every backend.
//
// # Idle detection
//
// The virtual clock (clock.Virtual) fires its next event only while its
// activity count is zero. Two independent accountings keep it above zero
// while any actor of the simulation has work, each sufficient on its own
// (the tests check both):
//
//   - Counter, a mailbox middleware: Begin when a message, user or system,
//     is posted to a mailbox, End once the receiver's handler has returned
//     for it. Posting happens on the sender's goroutine, inside the
//     sender's own handler or clock callback, which is itself counted, so
//     the count never touches zero between a send and its handling. It
//     counts every way a message reaches an actor (an actor's Send or
//     Respond, the root context, a timer callback), which sender and
//     receiver middlewares of the props would not: the root context and
//     the clock's callbacks have no sender middleware. A message to a
//     stopped actor still passes its mailbox (handled as a no-op) and is
//     ended; a message to a PID that no longer exists goes to dead letters
//     without being posted, so it is never begun.
//   - Serial, the dispatcher: every mailbox runs on one goroutine, and the
//     dispatcher holds one unit of activity from the first mailbox run it
//     is given until its queue is empty and the last run has returned.
//
// Most cascades start in a clock callback (a timer, a submission): the
// runtime sets Serial.Around as the clock's callback wrapper, so the
// mailbox runs such a callback schedules run right after it on the clock's
// own goroutine, under the callback's unit of activity, instead of on a
// goroutine started for the cascade; messages sent from elsewhere (the
// root context before the run, a test) still get a drain goroutine.
//
// Nothing else sleeps: timers (actors.Env.After, Every) are events of the
// clock (clock.Timers), the submissions are one event per job, and work an
// actor hands off (actors.Env.Go, the cluster's probes) runs inline. So
// the clock moves only when every message sent has been handled. A handler
// that blocks, or panics (protoactor restarts the actor and its message is
// never ended), holds the clock forever rather than letting it run ahead:
// Watch ends such a run after a minute of wall time without an event, its
// unfinished jobs failed with the reason.
//
// # Determinism
//
// Events fire one at a time in (time, registration) order, each once the
// cascade of the previous one has settled; within a cascade every mailbox
// runs on one goroutine at a time, in the order the mailboxes were given
// messages. No goroutine race orders anything, so a plan gives the
// same jobs.csv, byte for byte, and the same events (but for their wall
// stamps) on every run. A wall timer would break this: the runner's rank
// timeout (wall time) never fires in a simulation, where ranks are ready
// in the cascade that starts them.
//
// # What is not simulated
//
// No byte is sent and no rank runs: the fidelity verdict is "unmeasured";
// time scale and dilation do not apply and are reported as 1. Malleable
// jobs are refused (launch.Check): their execution depends on their
// resizes, which the model does not predict.
package sim
