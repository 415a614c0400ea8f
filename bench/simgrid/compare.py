#!/usr/bin/python3
"""Compare koala-emu's schedule (a run's jobs.csv) with SimGrid's (fcfs.py's
SCHEDULE.csv): the job sets, the makespans and every job's start. Exits 1
when the job sets or the makespans differ.

usage: compare.py KOALA_JOBS.csv SIMGRID.csv
"""
import csv
import sys


def load(path):
    with open(path) as f:
        return {r["id"]: (float(r["submit_s"]), float(r["start_s"]), float(r["end_s"])) for r in csv.DictReader(f)}


def makespan(s):
    return max(e for _, _, e in s.values()) - min(sub for sub, _, _ in s.values())


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ke, sg = load(sys.argv[1]), load(sys.argv[2])
    if set(ke) != set(sg):
        print("job sets differ: %d only in koala-emu, %d only in SimGrid" % (len(set(ke) - set(sg)), len(set(sg) - set(ke))))
        sys.exit(1)
    diff = {j: ke[j][1] - sg[j][1] for j in ke}
    same = sum(1 for d in diff.values() if abs(d) < 1e-3)
    mk, ms = makespan(ke), makespan(sg)
    print("jobs %d; makespan koala-emu %.3f s, SimGrid %.3f s; starts identical for %d jobs, largest difference %.3f s"
          % (len(ke), mk, ms, same, max(abs(d) for d in diff.values())))
    if abs(mk - ms) > 1e-3:
        sys.exit(1)


if __name__ == "__main__":
    main()
