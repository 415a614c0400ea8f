// Package malleabletest is the test world of the malleability actors
// (actors/mmanager, actors/mrunner): real cluster managers over fake nodes,
// and fake applications that pass safe points together, driven by a ticker.
//
// A fake node answers StartRank, RankTable, ResizeRanks and AbortRank like
// the real one (actors/node). A job's work is counted in
// processor-iterations (args["work"], default 40): each safe point consumes
// one unit per rank, so growing a job makes it end sooner. Resizes are
// collective: they apply at the first safe point where every rank has
// received its ResizeRanks. Probe and Expect let a test play one side of an
// exchange (a runner, a manager); internal/waittest waits on a condition.
// Only tests import this package.
package malleabletest
