package actors

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

func TestRegistryBucketsHaveOneShard(t *testing.T) {
	sys := actor.NewActorSystem(QuietLogging())
	defer sys.Shutdown()
	buckets := sys.ProcessRegistry.LocalPIDs.LocalPIDs
	if len(buckets) == 0 || len(buckets[0]) != 1 {
		t.Fatalf("%d buckets, the first of %d shards; want one shard each", len(buckets), len(buckets[0]))
	}
	// The registry still finds what is spawned.
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	if p, ok := sys.ProcessRegistry.Get(pid); !ok || p == nil {
		t.Fatalf("spawned %v is not in the registry", pid)
	}
}
