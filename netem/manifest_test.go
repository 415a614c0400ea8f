package netem

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestManifestRoundTrip(t *testing.T) {
	m, err := Preset("das3", []string{Vrije, Delft, Leiden})
	if err != nil {
		t.Fatal(err)
	}
	eff := func(src, dst string) Link {
		l, _ := m.Link(src, dst)
		l.Latency = max(l.Latency, 45*time.Microsecond)
		l.Jitter = 3 * time.Microsecond
		l.Loss = 0.001
		return l
	}
	man := BuildManifest(m, "userspace", "first mechanism whose probe passed", eff)
	man.Backend = "inproc"
	if len(man.Entries) != 9 {
		t.Fatalf("%d entries, want 9 ordered pairs", len(man.Entries))
	}
	var unavailable int
	for _, e := range man.Entries {
		if e.Requested.Unavailable {
			unavailable++
			if e.Mechanism != "-" || e.Reason == "" {
				t.Errorf("unavailable pair %s-%s: %+v", e.Src, e.Dst, e)
			}
		}
	}
	if unavailable != 2 {
		t.Errorf("%d unavailable entries, want delft-leiden both ways", unavailable)
	}
	path := filepath.Join(t.TempDir(), "links.json")
	if err := man.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(man, back) {
		t.Fatalf("round trip differs:\n%+v\n%+v", man, back)
	}
	// Units in the file are ms and MB/s.
	b, err := json.Marshal(man.Entries[1])
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, `"latency_ms":1.15`) || !strings.Contains(s, `"bandwidth_mbps":45`) {
		t.Fatalf("vrije-delft entry not in readable units: %s", s)
	}
	var sb strings.Builder
	man.Print(&sb)
	for _, want := range []string{"inproc", "vrije", "45.0 MB/s, 1.150 ms", "n/a", "userspace"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, sb.String())
		}
	}
}

func TestBuildManifestNilEffective(t *testing.T) {
	m, err := Preset("gbe", []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	man := BuildManifest(m, "htb", "r", nil)
	for _, e := range man.Entries {
		if e.Effective != e.Requested {
			t.Fatalf("nil effective must copy requested: %+v", e)
		}
	}
}
