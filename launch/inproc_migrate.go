package launch

import "github.com/koala-emu/koala-emu/launch/wiring"

// spawnRescheduler spawns the rescheduler of a plan with
// policy.migration.
func (r *inprocRun) spawnRescheduler() error {
	props, err := r.spec.Rescheduler(r.env)
	if err != nil || props == nil {
		return err
	}
	return r.spawn(props, wiring.ActorRescheduler)
}
