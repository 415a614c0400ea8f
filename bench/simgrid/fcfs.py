#!/usr/bin/python3
"""The benchmark's workload on SimGrid (python3-simgrid 3.32): one cluster of
256 hosts, first come, first served, one actor per job, the same rigid jobs
koala-emu replays from the same SWF file (bench/simgrid/README.md).

Each job's actor sleeps until its submit time, asks the scheduler actor for
its hosts through a mailbox, computes for its run time on the first of them
(the actor moves there; speed 1 Gflop/s, so run time x 1e9 flops) and
gives them back. The
scheduler starts jobs strictly in queue order: the head starts as soon as
enough hosts are free, and no job passes it (koala-emu's fcfs batch policy).
Messages carry no simulated payload over a zero-latency loopback, so the
schedule is the policy's alone.

usage: fcfs.py TRACE.swf HOSTS [SCHEDULE.csv]
prints the job count, the makespan (last end - first submit) in seconds and
the wall seconds of the simulation itself (Engine.run);
SCHEDULE.csv gets one line per job: id,submit,start,end.
"""
import bisect
import os
import sys
import tempfile
import time

from simgrid import Actor, Engine, Host, Mailbox, this_actor

SPEED = 1e9  # flop/s of every host

PLATFORM = """<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <cluster id="ctc" prefix="h" suffix="" radical="0-{last}" speed="1Gf"
           bw="10GBps" lat="0" loopback_bw="100GBps" loopback_lat="0"/>
</platform>
"""


def read_jobs(path):
    """(id, submit, procs, run, index) of every job line, in file order."""
    jobs = []
    with open(path) as f:
        for line in f:
            if line.startswith(";") or not line.strip():
                continue
            v = line.split()
            jobs.append(("ctc-" + v[0], float(v[1]), int(v[4]), float(v[3]), len(jobs)))
    return jobs


class State:
    def __init__(self, hosts, jobs):
        self.free = list(hosts)
        self.queue = []
        self.left = len(jobs)
        self.schedule = {}


def scheduler(state):
    inbox = Mailbox.by_name("scheduler")
    while state.left > 0:
        kind, job, arg = inbox.get()
        if kind == "submit":
            # The queue is in (submit time, file order): jobs submitted at
            # the same instant reach this mailbox in an order of the
            # engine's choosing, and the trace's order settles the tie.
            bisect.insort(state.queue, (job, arg), key=lambda e: (e[0][1], e[0][4]))
        else:  # "done": arg is the hosts it gives back
            state.free.extend(arg)
            state.left -= 1
        while state.queue and state.queue[0][0][2] <= len(state.free):
            job, reply = state.queue.pop(0)
            procs = job[2]
            hosts, state.free = state.free[:procs], state.free[procs:]
            reply.put(hosts, 0)


def job_actor(state, job):
    jid, submit, _, run, _ = job
    this_actor.sleep_until(submit)
    reply = Mailbox.by_name("job-" + jid)
    Mailbox.by_name("scheduler").put(("submit", job, reply), 0)
    hosts = reply.get()
    start = Engine.clock
    this_actor.set_host(hosts[0])
    this_actor.execute(run * SPEED)
    state.schedule[jid] = (submit, start, Engine.clock)
    Mailbox.by_name("scheduler").put(("done", job, hosts), 0)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    jobs = read_jobs(sys.argv[1])
    nhosts = int(sys.argv[2])
    if any(j[2] > nhosts for j in jobs):
        sys.exit("a job is wider than the cluster")
    e = Engine([sys.argv[0], "--log=root.thres:critical"])
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
        f.write(PLATFORM.format(last=nhosts))  # host h<nhosts> is the frontend
        platform = f.name
    try:
        e.load_platform(platform)
    finally:
        os.unlink(platform)
    front = Host.by_name("h%d" % nhosts)
    state = State([Host.by_name("h%d" % i) for i in range(nhosts)], jobs)
    Actor.create("scheduler", front, scheduler, state)
    for j in jobs:
        Actor.create(j[0], front, job_actor, state, j)
    t0 = time.perf_counter()
    e.run()
    run_s = time.perf_counter() - t0
    sched = state.schedule
    if len(sched) != len(jobs):
        sys.exit("%d of %d jobs finished" % (len(sched), len(jobs)))
    first = min(s for s, _, _ in sched.values())
    last = max(end for _, _, end in sched.values())
    print("jobs %d makespan_s %.3f run_wall_s %.3f" % (len(sched), last - first, run_s))
    if len(sys.argv) > 3:
        with open(sys.argv[3], "w") as out:
            out.write("id,submit_s,start_s,end_s\n")
            for j in jobs:
                s, st, en = sched[j[0]]
                out.write("%s,%.3f,%.3f,%.3f\n" % (j[0], s, st, en))


if __name__ == "__main__":
    main()
