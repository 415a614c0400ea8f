// Package virtualtest is a test world for actors on a virtual clock: every
// actor spawned through it counts its messages on a clock.Virtual (so the
// clock jumps to the next timer only once every message sent has been
// handled), a recorder keeps every event, and a probe keeps every message
// sent to it. Tests of actor kinds (actors/batch, actors/realloc) run whole
// schedules in milliseconds with exact instants, without launch.
package virtualtest
