package results

import "github.com/koala-emu/koala-emu/actors/msg"

// Migration is one job's move (SPEC §6), as results.json lists it: when
// it ran again, from which cluster to which, the phase it resumed at, the
// decision's gain, the predicted cost and the measured one (from every
// rank stopped, its checkpoint written, to the restarted job's first
// phase: placement, start-up, checkpoint read and redistribution), and the
// wait from the stop asked to the safe point where the ranks stopped, in
// scenario seconds.
type Migration struct {
	T              float64 `json:"t"`
	Job            string  `json:"job"`
	From           string  `json:"from"`
	To             string  `json:"to"`
	Phase          int     `json:"phase"`
	Gain           float64 `json:"gain"`
	CostModel      string  `json:"cost_model"`
	Forced         bool    `json:"forced,omitempty"`
	Trigger        string  `json:"trigger"` // "request" (the contract monitor) or "opportunistic" (a job ended)
	PredictedCostS float64 `json:"predicted_cost_s"`
	MeasuredCostS  float64 `json:"measured_cost_s"`
	StopWaitS      float64 `json:"stop_wait_s"`
}

// Migrations is the migration section of results.json: every migration,
// and the rescheduler's decisions counted: requests it answered, and how
// many it declined; opportunistic decisions (a job ended and freed nodes),
// and in how many it chose a job to move.
type Migrations struct {
	Decisions           int         `json:"decisions"`
	Declined            int         `json:"declined"`
	Opportunistic       int         `json:"opportunistic"`
	OpportunisticChosen int         `json:"opportunistic_chosen"`
	Moves               []Migration `json:"moves"`
}

func migrationRecord(ev *msg.Event) Migration {
	v := ev.Values
	return Migration{T: ev.TS, Job: ev.JobId, From: ev.Fields["from"], To: ev.Fields["to"], Phase: int(v["phase"]),
		Gain: v["gain"], CostModel: ev.Fields["cost_model"], Forced: ev.Fields["forced"] == "true", Trigger: ev.Fields["trigger"],
		PredictedCostS: v["predicted_cost_s"], MeasuredCostS: v["measured_cost_s"], StopWaitS: v["stop_wait_s"]}
}

// Migrations returns the run's migration section so far.
func (r *Recorder) Migrations() *Migrations {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := &Migrations{Decisions: r.counts[msg.EventMigrationDecision], Declined: r.declined,
		Opportunistic: r.counts[msg.EventOpportunistic], OpportunisticChosen: r.opportunisticChosen,
		Moves: append([]Migration{}, r.migrations...)}
	return m
}
