package scenarios

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Auto is the word that leaves the dilation to the launcher.
const Auto = "auto"

// Dilation is the dilation field of a scenario and of the --dilation flag:
// either a factor d (latency x d, bandwidth / d, compute x d) or auto, which
// leaves the choice to the launcher (the smallest factor the host carries).
// It reads from YAML as a number or the string auto; Validate checks the
// factor's range (MinDilation..MaxDilation).
type Dilation struct {
	Auto bool
	// Factor is the dilation when Auto is false.
	Factor float64
}

// ParseDilation reads "auto" or a number. It checks the syntax only; the
// range is checked by Validate and Expand.
func ParseDilation(s string) (Dilation, error) {
	s = strings.TrimSpace(s)
	if s == Auto {
		return Dilation{Auto: true}, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return Dilation{}, fmt.Errorf("%q is neither a number nor %s", s, Auto)
	}
	return Dilation{Factor: f}, nil
}

// String renders "auto" or the factor.
func (d Dilation) String() string {
	if d.Auto {
		return Auto
	}
	return strconv.FormatFloat(d.Factor, 'g', -1, 64)
}

// Set implements flag.Value, so that a command-line flag reads the same
// forms as the scenario file.
func (d *Dilation) Set(s string) error {
	v, err := ParseDilation(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// UnmarshalYAML reads a number or the string auto.
func (d *Dilation) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("expected a number or %s, found %s", Auto, describe(n))
	}
	if n.ShortTag() == "!!str" && n.Value == Auto {
		*d = Dilation{Auto: true}
		return nil
	}
	var f float64
	if n.ShortTag() == "!!str" || n.Decode(&f) != nil {
		return fmt.Errorf("%q is neither a number nor %s", n.Value, Auto)
	}
	*d = Dilation{Factor: f}
	return nil
}

// MarshalYAML writes auto or the factor.
func (d Dilation) MarshalYAML() (any, error) {
	if d.Auto {
		return Auto, nil
	}
	return d.Factor, nil
}

// WallBudget is the wall_budget field: the wall time a run may take, given
// in place of a time scale. It reads from YAML as a Go duration string
// ("10m", "1h30m") or a number of seconds. Validate checks its range
// (greater than 0, at most MaxWallSeconds).
type WallBudget struct {
	// Seconds is the budget as read (not range-checked).
	Seconds float64
}

// Duration returns the budget, or 0 when it is out of range.
func (w WallBudget) Duration() time.Duration {
	if !finite(w.Seconds) || w.Seconds <= 0 || w.Seconds > MaxWallSeconds {
		return 0
	}
	return secs(w.Seconds)
}

// UnmarshalYAML reads a duration string or a number of seconds.
func (w *WallBudget) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("expected a duration (\"10m\") or seconds, found %s", describe(n))
	}
	if n.ShortTag() == "!!int" || n.ShortTag() == "!!float" {
		var f float64
		if err := n.Decode(&f); err != nil {
			return fmt.Errorf("%q is not a number of seconds", n.Value)
		}
		*w = WallBudget{Seconds: f}
		return nil
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("%q is neither a duration (\"10m\", \"1h30m\") nor a number of seconds", n.Value)
	}
	*w = WallBudget{Seconds: d.Seconds()}
	return nil
}

// MarshalYAML writes the budget as a Go duration string when it is a whole
// number of nanoseconds in range, else as seconds.
func (w WallBudget) MarshalYAML() (any, error) {
	if d := w.Duration(); d > 0 && d.Seconds() == w.Seconds {
		return d.String(), nil
	}
	return w.Seconds, nil
}

// Override sets the dilation overrides of o from d: DilationAuto for auto,
// Dilation for a factor.
func (d Dilation) Override(o *Overrides) {
	if d.Auto {
		o.Dilation, o.DilationAuto = nil, true
		return
	}
	f := d.Factor
	o.Dilation, o.DilationAuto = &f, false
}
