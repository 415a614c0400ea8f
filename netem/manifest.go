package netem

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"text/tabwriter"
	"time"
)

// ManifestEntry is what is in effect for one ordered cluster pair.
type ManifestEntry struct {
	Src, Dst  string
	Requested Link
	Mechanism string
	Effective Link
	Reason    string
}

// Manifest records, for a run, how every link is shaped and why.
type Manifest struct {
	Backend, Mechanism, Reason string
	Entries                    []ManifestEntry
}

// BuildManifest lists every ordered pair of m's clusters (intra-cluster
// pairs included). effective reports the link really in effect for a pair;
// nil means the requested one. Unavailable pairs are listed with mechanism
// "-".
func BuildManifest(m Matrix, mech, reason string, effective func(src, dst string) Link) Manifest {
	man := Manifest{Mechanism: mech, Reason: reason}
	for i, src := range m.Clusters {
		for j, dst := range m.Clusters {
			req := m.Links[i][j]
			e := ManifestEntry{Src: src, Dst: dst, Requested: req, Mechanism: mech, Effective: req}
			switch {
			case req.Unavailable:
				e.Mechanism = "-"
				e.Reason = "pair unavailable: jobs may not span it"
			case effective != nil:
				e.Effective = effective(src, dst)
			}
			man.Entries = append(man.Entries, e)
		}
	}
	return man
}

// linkJSON is Link with readable units: milliseconds and MB/s (1e6 bytes).
type linkJSON struct {
	LatencyMs     float64 `json:"latency_ms"`
	BandwidthMBps float64 `json:"bandwidth_mbps"` // 0: unlimited
	JitterMs      float64 `json:"jitter_ms,omitempty"`
	Loss          float64 `json:"loss,omitempty"`
	Unavailable   bool    `json:"unavailable,omitempty"`
}

func toLinkJSON(l Link) linkJSON {
	return linkJSON{
		LatencyMs:     durMs(l.Latency),
		BandwidthMBps: l.Bandwidth / 1e6,
		JitterMs:      durMs(l.Jitter),
		Loss:          l.Loss,
		Unavailable:   l.Unavailable,
	}
}

func (j linkJSON) link() Link {
	return Link{
		Latency:     msDur(j.LatencyMs),
		Bandwidth:   math.Round(j.BandwidthMBps*1e6*1e3) / 1e3,
		Jitter:      msDur(j.JitterMs),
		Loss:        j.Loss,
		Unavailable: j.Unavailable,
	}
}

func durMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func msDur(f float64) time.Duration { return time.Duration(math.Round(f * float64(time.Millisecond))) }

type entryJSON struct {
	Src       string   `json:"src"`
	Dst       string   `json:"dst"`
	Requested linkJSON `json:"requested"`
	Mechanism string   `json:"mechanism"`
	Effective linkJSON `json:"effective"`
	Reason    string   `json:"reason,omitempty"`
}

// MarshalJSON writes latencies in ms and bandwidths in MB/s.
func (e ManifestEntry) MarshalJSON() ([]byte, error) {
	return json.Marshal(entryJSON{e.Src, e.Dst, toLinkJSON(e.Requested), e.Mechanism, toLinkJSON(e.Effective), e.Reason})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (e *ManifestEntry) UnmarshalJSON(b []byte) error {
	var j entryJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = ManifestEntry{Src: j.Src, Dst: j.Dst, Requested: j.Requested.link(), Mechanism: j.Mechanism, Effective: j.Effective.link(), Reason: j.Reason}
	return nil
}

type manifestJSON struct {
	Backend   string          `json:"backend"`
	Mechanism string          `json:"mechanism"`
	Reason    string          `json:"reason"`
	Entries   []ManifestEntry `json:"entries"`
}

// MarshalJSON uses lower-case keys.
func (m Manifest) MarshalJSON() ([]byte, error) {
	return json.Marshal(manifestJSON(m))
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *Manifest) UnmarshalJSON(b []byte) error {
	var j manifestJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*m = Manifest(j)
	return nil
}

// WriteJSON writes the manifest as indented JSON.
func (m Manifest) WriteJSON(path string) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("netem: manifest: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("netem: manifest: %w", err)
	}
	return nil
}

// ReadManifest reads a manifest written by WriteJSON.
func ReadManifest(path string) (Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Manifest{}, fmt.Errorf("netem: manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("netem: manifest %s: %w", path, err)
	}
	return m, nil
}

// Print writes a compact table of the manifest.
func (m Manifest) Print(w io.Writer) {
	fmt.Fprintf(w, "backend %s, mechanism %s: %s\n", m.Backend, m.Mechanism, m.Reason)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "src\tdst\trequested\tmechanism\teffective\treason")
	for _, e := range m.Entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Src, e.Dst, linkCell(e.Requested), e.Mechanism, linkCell(e.Effective), e.Reason)
	}
	_ = tw.Flush()
}

func linkCell(l Link) string {
	if l.Unavailable {
		return "n/a"
	}
	bw := "unlimited"
	if l.Bandwidth > 0 {
		bw = fmt.Sprintf("%.1f MB/s", l.Bandwidth/1e6)
	}
	s := fmt.Sprintf("%s, %.3f ms", bw, durMs(l.Latency))
	if l.Jitter > 0 {
		s += fmt.Sprintf(" ±%.3f", durMs(l.Jitter))
	}
	if l.Loss > 0 {
		s += fmt.Sprintf(" loss %.2g", l.Loss)
	}
	return s
}
