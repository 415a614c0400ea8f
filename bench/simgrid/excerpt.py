#!/usr/bin/python3
"""Cut the benchmark's workload out of the CTC SP2 log (Parallel Workloads
Archive, CTC-SP2-1996-3.1-cln.swf.gz): its header, then the first N job
lines that both simulators replay unchanged: not cancelled, 1 to MAXP
allocated processors, a run time of at least 1 s and no longer than the
requested time (so neither a kill at the walltime nor a skip rule applies).

usage: excerpt.py TRACE.swf.gz N MAXP > OUT.swf
"""
import gzip
import sys


def main():
    path, n, maxp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    kept = 0
    with gzip.open(path, "rt") as f:
        for line in f:
            if line.startswith(";"):
                sys.stdout.write(line)
                continue
            v = line.split()
            if len(v) != 18:
                continue
            run, procs, req, status = float(v[3]), int(v[4]), float(v[8]), int(v[10])
            if status == 5 or not 1 <= procs <= maxp or run < 1 or (req > 0 and run > req):
                continue
            sys.stdout.write(line)
            kept += 1
            if kept == n:
                return
    sys.exit(f"only {kept} eligible jobs in {path}")


if __name__ == "__main__":
    main()
