package malleability

import (
	"reflect"
	"testing"
)

func TestClusterViewAvailable(t *testing.T) {
	cases := []struct {
		c         ClusterView
		cap, want int
	}{
		{ClusterView{Idle: 20, Capacity: 100, KoalaUsed: 70, Threshold: 0.8}, 80, 10},
		{ClusterView{Idle: 5, Capacity: 100, KoalaUsed: 70, Threshold: 0.8}, 80, 5},
		{ClusterView{Idle: 30, Capacity: 100, KoalaUsed: 85, Threshold: 0.8}, 80, 0},
		{ClusterView{Idle: 30, Capacity: 100, KoalaUsed: 70}, 100, 30},                 // unset threshold: no cap
		{ClusterView{Idle: 30, Capacity: 100, KoalaUsed: 70, Threshold: 1.5}, 100, 30}, // out of range: no cap
		{ClusterView{Idle: 10, Capacity: 64, KoalaUsed: 0, Threshold: 0.7}, 44, 10},    // floor(44.8)
	}
	for _, c := range cases {
		if got := c.c.Cap(); got != c.cap {
			t.Errorf("%+v.Cap() = %d, want %d", c.c, got, c.cap)
		}
		if got := c.c.Available(); got != c.want {
			t.Errorf("%+v.Available() = %d, want %d", c.c, got, c.want)
		}
	}
}

type approachCase struct {
	name    string
	c       ClusterView
	running []Job
	queue   []Waiting
	want    Decision
}

func runApproachCases(t *testing.T, a Approach, pol Policy, cases []approachCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := a(pol, c.c, c.running, c.queue)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func view(idle, used int) ClusterView {
	return ClusterView{Name: "vrije", Idle: idle, Capacity: 100, KoalaUsed: used, Threshold: 0.8}
}

func st(id string, size int, after bool) Start {
	return Start{JobID: id, Cluster: "vrije", Size: size, AfterShrink: after}
}

func TestPRA(t *testing.T) {
	runApproachCases(t, PRA, FPSMA(), []approachCase{
		{"free processors grow running jobs, the queue waits",
			view(10, 20), []Job{nbody("a", 1, 2)}, []Waiting{{"w1", 2}},
			Decision{Grow: []Change{{"a", 10}}}},
		{"no running job can grow: waiting jobs start in order, misfits skipped",
			view(5, 20), []Job{nbody("a", 1, 46)}, []Waiting{{"w1", 2}, {"big", 4}, {"w2", 2}, {"w3", 2}},
			Decision{Start: []Start{st("w1", 2, false), st("w2", 2, false)}}},
		{"what the running jobs cannot take goes to the queue",
			view(6, 20), []Job{nbody("a", 1, 44)}, []Waiting{{"w1", 2}, {"w2", 2}, {"w3", 2}},
			Decision{Grow: []Change{{"a", 2}}, Start: []Start{st("w1", 2, false), st("w2", 2, false)}}},
		{"FT leftover below its next step goes to the queue",
			view(6, 20), []Job{ft("a", 1, 8)}, []Waiting{{"w1", 2}},
			Decision{Start: []Start{st("w1", 2, false)}}},
		{"threshold caps what KOALA takes",
			view(20, 78), []Job{nbody("a", 1, 2)}, []Waiting{{"w1", 2}},
			Decision{Grow: []Change{{"a", 2}}}},
		{"over the threshold: nothing happens, PRA never shrinks",
			view(20, 85), []Job{nbody("a", 1, 20)}, []Waiting{{"w1", 2}},
			Decision{}},
		{"FPSMA gives the growth to the earliest",
			view(9, 20), []Job{nbody("a", 1, 2), nbody("b", 2, 2)}, nil,
			Decision{Grow: []Change{{"a", 9}}}},
	})
	// With EGS as the policy too.
	got := PRA(EGS(), view(9, 20), []Job{nbody("a", 1, 2), nbody("b", 2, 2)}, nil)
	if want := []Change{{"a", 5}, {"b", 4}}; !reflect.DeepEqual(got.Grow, want) {
		t.Errorf("PRA(EGS) grow = %v, want %v", got.Grow, want)
	}
}

func TestPWA(t *testing.T) {
	runApproachCases(t, PWA, FPSMA(), []approachCase{
		{"head fits: start it, the rest grows running jobs",
			view(5, 20), []Job{nbody("a", 1, 2)}, []Waiting{{"w1", 2}},
			Decision{Grow: []Change{{"a", 3}}, Start: []Start{st("w1", 2, false)}}},
		{"head needs shrinks: mandatory shrink of the latest, start after it",
			view(1, 20), []Job{nbody("a", 1, 10), nbody("b", 2, 10)}, []Waiting{{"w1", 2}, {"w2", 2}},
			Decision{Shrink: []Change{{"b", -1}}, Start: []Start{st("w1", 2, true)}}},
		{"jobs that fit start first; the first misfit gets the shrinks",
			view(3, 20), []Job{nbody("a", 1, 10)}, []Waiting{{"w1", 2}, {"w2", 4}, {"w3", 2}},
			Decision{Shrink: []Change{{"a", -3}}, Start: []Start{st("w1", 2, false), st("w2", 4, true)}}},
		{"shrinking cannot help: grow instead",
			view(4, 20), []Job{nbody("a", 1, 5)}, []Waiting{{"big", 20}},
			Decision{Grow: []Change{{"a", 4}}}},
		{"unhelpable head skipped, later jobs that fit still start",
			view(4, 20), []Job{nbody("a", 1, 5)}, []Waiting{{"big", 20}, {"w1", 2}},
			Decision{Grow: []Change{{"a", 2}}, Start: []Start{st("w1", 2, false)}}},
		{"threshold reached: shrink to make room within it",
			view(20, 80), []Job{nbody("a", 1, 10)}, []Waiting{{"w1", 2}},
			Decision{Shrink: []Change{{"a", -2}}, Start: []Start{st("w1", 2, true)}}},
		{"above the threshold: shrink covers the excess too",
			view(20, 82), []Job{nbody("a", 1, 10)}, []Waiting{{"w1", 2}},
			Decision{Shrink: []Change{{"a", -4}}, Start: []Start{st("w1", 2, true)}}},
		{"threshold respected when growing",
			view(20, 77), []Job{nbody("a", 1, 10)}, nil,
			Decision{Grow: []Change{{"a", 3}}}},
		{"FT over-release still covers the head",
			view(0, 20), []Job{nbody("a", 1, 2), ft("b", 2, 16)}, []Waiting{{"w1", 2}},
			Decision{Shrink: []Change{{"b", -8}}, Start: []Start{st("w1", 2, true)}}},
	})
	// EGS spreads the mandatory shrink.
	got := PWA(EGS(), view(0, 20), []Job{nbody("a", 1, 10), nbody("b", 2, 10), nbody("c", 3, 10)}, []Waiting{{"w1", 4}})
	want := Decision{Shrink: []Change{{"a", -1}, {"b", -1}, {"c", -2}}, Start: []Start{st("w1", 4, true)}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PWA(EGS) = %+v, want %+v", got, want)
	}
}
