// Package report turns run, sweep and study directories into one
// self-contained HTML page (report.html, inline CSS, no JavaScript, no
// network) with its figures next to it, each as PNG and SVG, drawn with
// gonum.org/v1/plot: AJRT against net utilisation per policy with the
// saturation point marked (see Saturation for the rule), execution time
// against the number of clusters per application and interconnect, CDFs of
// wait and response times, utilisation and grows/shrinks over time for
// malleable runs, and a comparison table of the runs given.
//
// An input is recognised by the files it holds: a run directory (what
// koala-emu run --out writes) has results.json and jobs.csv, a sweep
// directory (package sweep) has cells/ and sweep.json, a study directory
// has study.json (study cluster-count --out).
package report
