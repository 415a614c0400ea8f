// Package results records a run: the recorder actor receives every event,
// appends it to events.jsonl, folds it into one record per job, and at the
// end writes jobs.csv and results.json (AJRT, wait, queue, startup and
// execution times, co-allocation share, net and observed utilisation,
// execution time by application and by number of clusters) and prints the
// summary table.
package results
