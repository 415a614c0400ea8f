package actors

import cmap "github.com/orcaman/concurrent-map"

// protoactor's process registry is 1,024 buckets, each a concurrent map of
// cmap.SHARD_COUNT shards (32 by default): every actor system starts by
// making 32,768 Go maps, a few milliseconds, most of a short simulation's
// start. The buckets spread the registry's locks already, so each is made
// of one shard. The count is read whenever a map is used, so it is set
// here, once, before any actor system exists (nothing in this module nor
// in protoactor makes one while packages initialise).
func init() { cmap.SHARD_COUNT = 1 }
