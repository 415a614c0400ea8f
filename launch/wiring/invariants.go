package wiring

import (
	"strconv"
	"strings"

	"github.com/koala-emu/koala-emu/actors/invariant"
	"github.com/koala-emu/koala-emu/actors/msg"
)

// KindInvariantReport is the kind of the msg.Event that carries a host's
// invariant counters to the launcher: the launcher asks with an empty one,
// the host answers with its counters (values "check.NAME" and
// "violation.NAME", fields "detail.N"). It is never recorded.
const KindInvariantReport = "invariant_report"

// InvariantReport encodes a host's counters as the answer to a
// KindInvariantReport request.
func InvariantReport(inv invariant.Summary) *msg.Event {
	ev := &msg.Event{Kind: KindInvariantReport, Values: map[string]float64{}, Fields: map[string]string{}}
	for k, v := range inv.Checks {
		ev.Values["check."+k] = float64(v)
	}
	for k, v := range inv.Violations {
		ev.Values["violation."+k] = float64(v)
	}
	for i, d := range inv.Details {
		ev.Fields["detail."+strconv.Itoa(i)] = d
	}
	return ev
}

// AddInvariantReport adds a host's report to inv (which it returns).
func AddInvariantReport(inv invariant.Summary, ev *msg.Event) invariant.Summary {
	if inv.Checks == nil {
		inv.Checks = map[string]int{}
	}
	if inv.Violations == nil {
		inv.Violations = map[string]int{}
	}
	for k, v := range ev.GetValues() {
		if name, ok := strings.CutPrefix(k, "check."); ok {
			inv.Checks[name] += int(v)
		} else if name, ok := strings.CutPrefix(k, "violation."); ok {
			inv.Violations[name] += int(v)
		}
	}
	for i := 0; i < len(ev.GetFields()) && len(inv.Details) < maxViolationDetails; i++ {
		if d, ok := ev.GetFields()["detail."+strconv.Itoa(i)]; ok {
			inv.Details = append(inv.Details, d)
		}
	}
	return inv
}
