package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/koala-emu/koala-emu/results"
)

// Figure geometry: the plot area's size; a legend wider than legendMaxShare
// of the width goes below the plot instead of to its right.
const (
	figW           = 7.5 * vg.Inch
	figH           = 4.2 * vg.Inch
	figMargin      = 0.08 * vg.Inch
	legendGap      = 0.15 * vg.Inch
	legendMaxShare = 0.34
	pngDPI         = 144
)

// figure is one chart: a plot and its legend, drawn beside it.
type figure struct {
	Name    string // file base name: Name.png and Name.svg
	Title   string
	Caption string
	p       *plot.Plot
	legend  plot.Legend
}

func newFigure(name, title, xLabel, yLabel string) *figure {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	// Sans-serif text throughout, as in the page.
	for _, st := range []*text.Style{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle,
		&p.X.Tick.Label, &p.Y.Tick.Label} {
		st.Font.Variant = "Sans"
	}
	p.Title.TextStyle.Font.Size = 13
	p.X.Label.TextStyle.Font.Size = 11
	p.Y.Label.TextStyle.Font.Size = 11
	p.X.Tick.Marker = niceTicks{}
	p.Y.Tick.Marker = niceTicks{}
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{Y: 225}
	grid.Horizontal.Color = color.Gray{Y: 225}
	p.Add(grid)
	l := plot.NewLegend()
	l.Left, l.Top = true, true
	l.TextStyle.Font.Size = 10
	l.TextStyle.Font.Variant = "Sans"
	l.Padding = 2
	return &figure{Name: name, Title: title, p: p, legend: l}
}

// palette is Okabe and Ito's colour-blind-safe set (yellow left out: it
// is unreadable on white), then black and grey.
var palette = []color.Color{
	color.RGBA{0x00, 0x72, 0xB2, 0xFF}, // blue
	color.RGBA{0xD5, 0x5E, 0x00, 0xFF}, // vermillion
	color.RGBA{0x00, 0x9E, 0x73, 0xFF}, // bluish green
	color.RGBA{0xCC, 0x79, 0xA7, 0xFF}, // reddish purple
	color.RGBA{0xE6, 0x9F, 0x00, 0xFF}, // orange
	color.RGBA{0x56, 0xB4, 0xE9, 0xFF}, // sky blue
	color.RGBA{0x00, 0x00, 0x00, 0xFF}, // black
	color.RGBA{0x80, 0x80, 0x80, 0xFF}, // grey
}

// colour, dash and glyph of the i-th line.
func colour(i int) color.Color { return palette[i%len(palette)] }
func dashes(i int) []vg.Length {
	if i == 0 {
		return nil
	}
	return plotutil.Dashes(i)
}
func glyph(i int) draw.GlyphDrawer { return plotutil.Shape(i) }

// addLine adds a line (with its points when marks) styled by the colour,
// dash and glyph indices, and its legend entry.
func (f *figure) addLine(name string, xys plotter.XYs, ci, di, gi int, marks bool, step plotter.StepKind) error {
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("figure %s: line %s: %w", f.Name, name, err)
	}
	l.Color = colour(ci)
	l.Width = vg.Points(1.6)
	l.Dashes = dashes(di)
	l.StepStyle = step
	f.p.Add(l)
	thumbs := []plot.Thumbnailer{l}
	if marks {
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return fmt.Errorf("figure %s: points %s: %w", f.Name, name, err)
		}
		s.Color = colour(ci)
		s.Shape = glyph(gi)
		s.Radius = vg.Points(3)
		f.p.Add(s)
		thumbs = append(thumbs, s)
	}
	f.legend.Add(name, thumbs...)
	return nil
}

// layout returns the image size and where the legend goes.
func (f *figure) layout() (w, h vg.Length, right bool, lw, lh vg.Length) {
	r := f.legend.Rectangle(draw.Canvas{})
	lw, lh = r.Max.X-r.Min.X, r.Max.Y-r.Min.Y
	if lw+legendGap <= legendMaxShare*figW {
		return figW + lw + legendGap + 2*figMargin, figH + 2*figMargin, true, lw, lh
	}
	return figW + 2*figMargin, figH + lh + legendGap + 2*figMargin, false, lw, lh
}

// draw renders the figure on c: a white background, the plot, and the
// legend to the right of the plot (top-aligned with its data area) or
// below it.
func (f *figure) draw(c draw.Canvas) {
	_, _, right, lw, lh := f.layout()
	c.SetColor(color.White)
	c.Fill(c.Rectangle.Path())
	c = draw.Crop(c, figMargin, -figMargin, figMargin, -figMargin)
	titleH := vg.Length(0)
	if f.p.Title.Text != "" {
		titleH = f.p.Title.TextStyle.Rectangle(f.p.Title.Text).Size().Y + f.p.Title.Padding
	}
	if right {
		f.p.Draw(draw.Crop(c, 0, -(lw + legendGap), 0, 0))
		lc := c
		lc.Min.X = c.Max.X - lw
		lc.Max.Y = c.Max.Y - titleH
		f.legend.Draw(lc)
		return
	}
	f.p.Draw(draw.Crop(c, 0, 0, lh+legendGap, 0))
	lc := c
	lc.Min.X += 0.6 * vg.Inch // under the data area, past the Y axis
	lc.Max.Y = c.Min.Y + lh
	f.legend.Draw(lc)
}

// save writes Name.png and Name.svg into dir and returns their names.
func (f *figure) save(dir string) ([]string, error) {
	w, h, _, _, _ := f.layout()
	png := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(pngDPI))
	f.draw(draw.New(png))
	var pb bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: png}).WriteTo(&pb); err != nil {
		return nil, fmt.Errorf("figure %s: png: %w", f.Name, err)
	}
	svg := vgsvg.New(w, h)
	f.draw(draw.New(svg))
	var sb bytes.Buffer
	if _, err := svg.WriteTo(&sb); err != nil {
		return nil, fmt.Errorf("figure %s: svg: %w", f.Name, err)
	}
	names := []string{f.Name + ".png", f.Name + ".svg"}
	for i, b := range [][]byte{pb.Bytes(), sb.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, names[i]), b, 0o644); err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
	}
	return names, nil
}

// slug makes a file-name part of s: lower-case letters, digits and '-'.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.TrimSuffix(b.String(), "-")
	if out == "" {
		out = "x"
	}
	if len(out) > 60 {
		out = out[:60]
	}
	return out
}

// timeUnit picks seconds, minutes or hours for a span in seconds.
func timeUnit(maxS float64) (div float64, unit string) {
	switch {
	case maxS > 3*3600:
		return 3600, "h"
	case maxS > 30*60:
		return 60, "min"
	}
	return 1, "s"
}

// integerTicks labels the whole numbers lo..hi.
type integerTicks struct{}

func (integerTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for v := math.Ceil(lo); v <= hi; v++ {
		out = append(out, plot.Tick{Value: v, Label: strconv.Itoa(int(v))})
	}
	return out
}

// niceTicks labels about six round values (1, 2, 2.5 or 5 times a power
// of ten apart) with unlabelled ticks between them.
type niceTicks struct{}

func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	raw := (hi - lo) / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	minor := step / 5
	dec := 0 // decimals that write every labelled value exactly
	for ; dec < 9 && math.Abs(step*math.Pow(10, float64(dec))-math.Round(step*math.Pow(10, float64(dec)))) > 1e-9; dec++ {
	}
	var out []plot.Tick
	for i := math.Ceil(lo / minor); i*minor <= hi*(1+1e-12); i++ {
		v := i * minor
		t := plot.Tick{Value: v}
		if q := v / step; math.Abs(q-math.Round(q)) < 1e-9 {
			t.Label = strconv.FormatFloat(v, 'f', dec, 64)
		}
		out = append(out, t)
	}
	return out
}

// logTicks labels 1, 2 and 5 times the powers of ten (only the powers
// beyond three decades), with unlabelled ticks at the other integers times
// them.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) {
		return plot.LogTicks{Prec: -1}.Ticks(lo, hi)
	}
	wide := math.Log10(hi/lo) > 3
	var out []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		p := math.Pow(10, e)
		for m := 1.0; m <= 9; m++ {
			v := m * p
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (!wide && (m == 2 || m == 5)) {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			out = append(out, t)
		}
	}
	return out
}

// levelTicks labels the given values (every other one beyond 20).
type levelTicks []float64

// evenlySpaced reports whether xs (sorted) form a grid: at least two
// values, equal steps to within 1 %.
func evenlySpaced(xs []float64) bool {
	if len(xs) < 2 {
		return false
	}
	step := xs[1] - xs[0]
	for i := 2; i < len(xs); i++ {
		if math.Abs(xs[i]-xs[i-1]-step) > 0.01*step {
			return false
		}
	}
	return step > 0
}

func (t levelTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 1
	if len(t) > 20 {
		step = 2
	}
	var out []plot.Tick
	for i, v := range t {
		if v < lo || v > hi {
			continue
		}
		l := ""
		if i%step == 0 {
			l = pct(v)
		}
		out = append(out, plot.Tick{Value: v, Label: l})
	}
	return out
}

// ajrtFigure is AJRT against net utilisation, one line per policy, each
// line's saturation point ringed.
func ajrtFigure(name, title string, ss []series, k, u float64) (*figure, []SaturationPoint, error) {
	f := newFigure(name, title, "net utilisation (%)", "AJRT (s)")
	var sat plotter.XYs
	points := make([]SaturationPoint, len(ss))
	lo, hi := math.Inf(1), math.Inf(-1)
	var xs []float64
	for i, s := range ss {
		var xys plotter.XYs
		for _, l := range s.Levels {
			if !containsF(xs, l.UtilPct) {
				xs = append(xs, l.UtilPct)
			}
			if !math.IsNaN(l.AJRTS) && l.AJRTS > 0 {
				xys = append(xys, plotter.XY{X: l.UtilPct, Y: l.AJRTS})
				lo, hi = math.Min(lo, l.AJRTS), math.Max(hi, l.AJRTS)
			}
		}
		if err := f.addLine(s.Policy, xys, i, i, i, true, plotter.NoStep); err != nil {
			return nil, nil, err
		}
		p := Saturate(s.Levels, k, u)
		points[i] = p
		if p.Found {
			lv := s.Levels[p.Index]
			y := lv.AJRTS
			if math.IsNaN(y) || y <= 0 {
				y = math.NaN() // placed at the top of the axis below
			}
			sat = append(sat, plotter.XY{X: lv.UtilPct, Y: y})
		}
	}
	sort.Float64s(xs)
	if evenlySpaced(xs) {
		f.p.X.Tick.Marker = levelTicks(xs)
	}
	if hi > 0 && hi/lo > 20 {
		f.p.Y.Scale = plot.LogScale{}
		f.p.Y.Tick.Marker = logTicks{}
		f.p.Y.Label.Text = "AJRT (s, log scale)"
	} else {
		f.p.Y.Min = 0
	}
	for i := range sat {
		if math.IsNaN(sat[i].Y) {
			sat[i].Y = math.Max(hi, 1)
		}
	}
	if len(sat) > 0 {
		s, err := plotter.NewScatter(sat)
		if err != nil {
			return nil, nil, fmt.Errorf("figure %s: saturation points: %w", name, err)
		}
		s.Shape = draw.RingGlyph{}
		s.Radius = vg.Points(8)
		s.Color = color.RGBA{R: 220, A: 255}
		f.p.Add(s)
		f.legend.Add("saturation point", s)
	}
	return f, points, nil
}

// execPoint is one execution time of a job on some clusters.
type execPoint struct {
	App, Interconnect string
	Clusters          int
	ExecS             float64
}

// execFigure is the mean execution time against the number of clusters,
// a line per application (colour) and interconnect (dash).
func execFigure(name string, pts []execPoint) (*figure, error) {
	type key struct {
		app, ic string
		k       int
	}
	sum := map[key]float64{}
	cnt := map[key]int{}
	appIdx, icIdx := map[string]int{}, map[string]int{}
	var apps, ics []string
	maxK := 1
	for _, p := range pts {
		k := key{p.App, p.Interconnect, p.Clusters}
		sum[k] += p.ExecS
		cnt[k]++
		if _, ok := appIdx[p.App]; !ok {
			appIdx[p.App] = len(apps)
			apps = append(apps, p.App)
		}
		if _, ok := icIdx[p.Interconnect]; !ok {
			icIdx[p.Interconnect] = len(ics)
			ics = append(ics, p.Interconnect)
		}
		maxK = max(maxK, p.Clusters)
	}
	sort.Strings(apps)
	for i, a := range apps {
		appIdx[a] = i
	}
	f := newFigure(name, "Execution time against the number of clusters", "number of clusters the job spans", "mean execution time (s)")
	f.p.X.Tick.Marker = integerTicks{}
	f.p.X.Min, f.p.X.Max = 0.8, float64(maxK)+0.2
	f.p.Y.Min = 0
	for _, a := range apps {
		for _, ic := range ics {
			var xys plotter.XYs
			for k := 1; k <= maxK; k++ {
				if n := cnt[key{a, ic, k}]; n > 0 {
					xys = append(xys, plotter.XY{X: float64(k), Y: sum[key{a, ic, k}] / float64(n)})
				}
			}
			label := a + ", " + ic
			if err := f.addLine(label, xys, appIdx[a], icIdx[ic], icIdx[ic], true, plotter.NoStep); err != nil {
				return nil, err
			}
		}
	}
	return f, nil
}

// cdfFigure is the empirical CDF of a per-job time, one line per run.
func cdfFigure(name, title, what string, runs []*run, get func(jobRow) float64) (*figure, error) {
	maxV := 0.0
	vals := make([][]float64, len(runs))
	for i, r := range runs {
		for _, j := range r.Jobs {
			if v := get(j); j.completed && v >= 0 {
				vals[i] = append(vals[i], v)
				maxV = math.Max(maxV, v)
			}
		}
		sort.Float64s(vals[i])
	}
	div, unit := timeUnit(maxV)
	f := newFigure(name, title, fmt.Sprintf("%s (%s)", what, unit), "fraction of completed jobs")
	f.p.Y.Min, f.p.Y.Max = 0, 1
	f.p.X.Min = 0
	for i, r := range runs {
		v := vals[i]
		if len(v) == 0 {
			continue
		}
		xys := plotter.XYs{{X: v[0] / div, Y: 0}}
		for k, x := range v {
			xys = append(xys, plotter.XY{X: x / div, Y: float64(k+1) / float64(len(v))})
		}
		if err := f.addLine(fmt.Sprintf("%s (%d jobs)", r.Label, len(v)), xys, i, i, i, false, plotter.PostStep); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// utilFigure is a malleable run's utilisation over time: at each sampling
// instant, the processors held by KOALA's jobs and by local users over the
// capacity, summed over the clusters, each cluster at its latest sample
// (clusters are sampled one by one, not all at the same instant).
func utilFigure(name string, r *run) (*figure, error) {
	koala, local, total, unit := utilSeries(r.Util)
	f := newFigure(name, "Utilisation over time: "+r.Label, fmt.Sprintf("time since the run started (%s)", unit), "processors in use (% of capacity)")
	f.p.Y.Min, f.p.Y.Max = 0, 100
	f.p.X.Min = 0
	for i, l := range []struct {
		name string
		xys  plotter.XYs
		ci   int
	}{{"KOALA jobs", koala, 0}, {"local users", local, 1}, {"total (KOALA + local)", total, 7}} {
		if err := f.addLine(l.name, l.xys, l.ci, i, i, false, plotter.PostStep); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// utilSeries computes the utilisation figure's lines (percent of the
// capacity against time in unit).
func utilSeries(util []results.UtilSample) (koala, local, total plotter.XYs, unit string) {
	samples := append([]results.UtilSample(nil), util...)
	sort.SliceStable(samples, func(i, j int) bool { return samples[i].T < samples[j].T })
	maxT := 0.0
	if len(samples) > 0 {
		maxT = samples[len(samples)-1].T
	}
	div, unit := timeUnit(maxT)
	last := map[string]results.UtilSample{}
	for i, u := range samples {
		last[u.Cluster] = u
		if i+1 < len(samples) && samples[i+1].T == u.T {
			continue // the instant's other clusters first
		}
		var c, k, l float64
		for _, s := range last {
			c += s.Capacity
			k += s.Koala
			l += s.Local
		}
		if c <= 0 {
			continue
		}
		x := u.T / div
		koala = append(koala, plotter.XY{X: x, Y: 100 * k / c})
		local = append(local, plotter.XY{X: x, Y: 100 * l / c})
		total = append(total, plotter.XY{X: x, Y: 100 * (k + l) / c})
	}
	return koala, local, total, unit
}

// resizeFigure is a malleable run's grows and shrinks over time, as
// cumulative counts.
func resizeFigure(name string, r *run) (*figure, error) {
	ops := append([]opPoint(nil), opPoints(r)...)
	maxT := 0.0
	for _, o := range ops {
		maxT = math.Max(maxT, o.t)
	}
	for _, u := range r.Util {
		maxT = math.Max(maxT, u.T)
	}
	div, unit := timeUnit(maxT)
	f := newFigure(name, "Grows and shrinks over time: "+r.Label, fmt.Sprintf("time since the run started (%s)", unit), "operations so far (count)")
	f.p.Y.Min = 0
	for i, kind := range []string{"grow", "shrink", "mandatory shrink"} {
		xys := plotter.XYs{{X: 0, Y: 0}}
		n := 0
		for _, o := range ops {
			if o.kind == kind || (kind == "shrink" && o.kind == "mandatory shrink") {
				n++
				xys = append(xys, plotter.XY{X: o.t / div, Y: float64(n)})
			}
		}
		xys = append(xys, plotter.XY{X: maxT / div, Y: float64(n)})
		label := map[string]string{"grow": "grows", "shrink": "shrinks, all", "mandatory shrink": "mandatory shrinks"}[kind]
		if err := f.addLine(fmt.Sprintf("%s (%d)", label, n), xys, i, i, i, false, plotter.PostStep); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func containsF(xs []float64, x float64) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

type opPoint struct {
	t    float64
	kind string
}

func opPoints(r *run) []opPoint {
	out := make([]opPoint, 0, len(r.Ops))
	for _, o := range r.Ops {
		k := o.Op
		if k == "shrink" && o.Mandatory {
			k = "mandatory shrink"
		}
		out = append(out, opPoint{o.T, k})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].t < out[j].t })
	return out
}
