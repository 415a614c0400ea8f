package membership

import (
	"context"
	"errors"
	"fmt"
	"sort"
)

// Roles of the actor hosts of a koala-emu run, as carried in Member.Role.
const (
	RoleScheduler = "scheduler"
	RoleKIS       = "kis"
	RoleCluster   = "cluster"
	RoleNode      = "node"
	RoleRunner    = "runner"
)

// ErrClosed is returned by operations on a provider after Leave or Close.
var ErrClosed = errors.New("membership: provider closed")

// Member is one actor host as seen through membership.
type Member struct {
	// Name is unique within a run, for example "vrije-n001" or "scheduler".
	Name string
	// Role is one of the Role* constants.
	Role string
	// Cluster is the cluster a cluster manager, node or runner belongs to;
	// empty for the scheduler and the information service.
	Cluster string
	// Addr is the protoactor remote address (host:port) of the member's
	// actor system, the address other members send actor messages to.
	Addr string
	// Meta holds further small key/value pairs. With the memberlist
	// provider, Role, Cluster, Addr and Meta together must encode into
	// MaxMetaSize bytes.
	Meta map[string]string
}

// Equal reports whether two members carry the same name and data.
func (m Member) Equal(o Member) bool {
	if m.Name != o.Name || m.Role != o.Role || m.Cluster != o.Cluster || m.Addr != o.Addr || len(m.Meta) != len(o.Meta) {
		return false
	}
	for k, v := range m.Meta {
		if w, ok := o.Meta[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Clone returns a copy of m that shares no map with it.
func (m Member) Clone() Member {
	if m.Meta != nil {
		meta := make(map[string]string, len(m.Meta))
		for k, v := range m.Meta {
			meta[k] = v
		}
		m.Meta = meta
	}
	return m
}

// String returns "name(role/cluster@addr)" for logs.
func (m Member) String() string {
	return fmt.Sprintf("%s(%s/%s@%s)", m.Name, m.Role, m.Cluster, m.Addr)
}

// EventKind says what happened to a member.
type EventKind int

const (
	// Join: the member became reachable (first join, or back after a
	// failure or a healed partition).
	Join EventKind = iota + 1
	// Leave: the member announced its departure (Provider.Leave).
	Leave
	// Fail: the member stopped answering and was declared dead, or a
	// partition cut it off.
	Fail
	// Update: the member's metadata changed.
	Update
)

// String returns "join", "leave", "fail" or "update".
func (k EventKind) String() string {
	switch k {
	case Join:
		return "join"
	case Leave:
		return "leave"
	case Fail:
		return "fail"
	case Update:
		return "update"
	default:
		return fmt.Sprintf("EventKind(%d)", int(k))
	}
}

// Event is one membership change seen by a provider.
type Event struct {
	Kind   EventKind
	Member Member
}

// String returns "kind name(role/cluster@addr)".
func (e Event) String() string { return e.Kind.String() + " " + e.Member.String() }

// Provider is one actor host's view of membership.
//
// A provider's life is New -> Join -> (Members, Events)* -> Leave or Close.
// Leave announces a graceful departure, others see a Leave event. Close
// without Leave stops abruptly, others see a Fail event (as if the host had
// crashed). Both close the Events channel; undelivered events are dropped.
type Provider interface {
	// Local returns the member this provider speaks for.
	Local() Member
	// Join enters the membership through seeds (provider-specific
	// addresses; the memberlist provider takes gossip host:port strings).
	// With no reachable seed other than itself the provider starts a new
	// membership alone. Join retries until a seed answers or ctx ends.
	// Join on a provider that has joined already exchanges the whole
	// membership with the seeds again: it repairs what gossip missed (the
	// in-memory provider has nothing to repair).
	Join(ctx context.Context, seeds []string) error
	// Members returns the members currently believed alive, including the
	// local one, sorted by name.
	Members() []Member
	// Events returns the channel of membership changes, including the local
	// member's own Join. The channel is closed by Leave and Close.
	Events() <-chan Event
	// Leave announces a graceful departure, waits until it has spread or
	// ctx ends, and releases the provider.
	Leave(ctx context.Context) error
	// Close releases the provider without announcing a departure.
	// It is safe to call more than once and after Leave.
	Close() error
}

func sortMembers(ms []Member) []Member {
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	return ms
}
