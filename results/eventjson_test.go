package results

import (
	"encoding/json"
	"math"
	"math/rand"
	"testing"

	"github.com/koala-emu/koala-emu/actors/msg"
)

// The hand-written encoder writes exactly what json.Marshal writes of the
// event's map: events.jsonl must not change with it.
func TestAppendEventMatchesJSONMarshal(t *testing.T) {
	events := []*msg.Event{
		{TS: 164472, WallS: 0.004295, Kind: "submit", JobId: "ctc-2", Source: "launcher",
			Fields: map[string]string{"app": "swf", "request": "local", "cluster": "ctc"}, Values: map[string]float64{"size": 17}},
		{Kind: "x"},
		{TS: 1e-7, WallS: 1e21, Kind: "k", Values: map[string]float64{"tiny": 1.5e-9, "neg": -0.1234567, "big": 9e13, "zero": 0, "nz": math.Copysign(0, -1)}},
		// Keys shared between the fixed members, the fields and the values:
		// the last one set wins.
		{TS: 3, Kind: "k", JobId: "j", Source: "s", Fields: map[string]string{"kind": "field kind", "job": "fj", "procs": "p"},
			Values: map[string]float64{"procs": 4, "t_s": 9, "source": 1}},
		{Kind: "esc", Fields: map[string]string{"q\"k": "a\"b\\c", "html": "<a href='x'>&amp;</a>", "ctl": "\x00\x01\b\f\n\r\t\x1f\x7f",
			"utf8": "héllo \u2028 \u2029 ✓", "bad": "a\xffb\xc3", "": "empty key"}},
	}
	rng := rand.New(rand.NewSource(1))
	for range 200 {
		ev := &msg.Event{TS: rng.Float64() * 1e6, WallS: rng.ExpFloat64(), Kind: "k", Fields: map[string]string{}, Values: map[string]float64{}}
		for range rng.Intn(8) {
			ev.Fields[string(rune('a'+rng.Intn(6)))] = string([]byte{byte(rng.Intn(256)), byte(rng.Intn(128))})
			ev.Values[string(rune('a'+rng.Intn(6)))] = (rng.Float64() - 0.5) * math.Pow(10, float64(rng.Intn(40)-20))
		}
		events = append(events, ev)
	}
	var enc eventEncoder
	for i, ev := range events {
		want, err := json.Marshal(eventJSON(ev))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := enc.appendEvent(nil, ev)
		if !ok || string(got) != string(want) {
			t.Errorf("event %d:\n got %s (ok %v)\nwant %s", i, got, ok, want)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, ok := enc.appendEvent(nil, &msg.Event{Kind: "k", Values: map[string]float64{"v": f}}); ok {
			t.Errorf("value %v: encoded, want refused", f)
		}
	}
}
