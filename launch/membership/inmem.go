package membership

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// Hub is an in-process membership shared by InmemProviders: the membership
// of the inproc backend and of unit tests. It delivers events synchronously
// into each provider's queue, in member-name order, so runs replay exactly.
//
// Besides joining and leaving through providers, a test can change the
// world from outside: Fail crashes a member, Partition splits the members
// into islands that see each other as failed, Heal joins them again and
// Update changes a member's metadata.
type Hub struct {
	mu      sync.Mutex
	live    map[string]*InmemProvider // joined, not yet left/failed/closed
	island  map[string]int            // partition island by member name; absent = 0
	removed map[string]EventKind      // scratch for recompute: why a member went away
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{live: map[string]*InmemProvider{}, island: map[string]int{}}
}

// InmemProvider is a Provider backed by a Hub.
type InmemProvider struct {
	hub  *Hub
	self Member
	q    *eventQueue

	blind bool // seen by the others, sees none of them (NewMember)

	// guarded by hub.mu
	joined bool
	gone   bool              // left, failed or closed
	view   map[string]Member // members this provider believes alive
}

var _ Provider = (*InmemProvider)(nil)

// NewProvider returns a provider for self that joins the hub on Join.
func (h *Hub) NewProvider(self Member) *InmemProvider {
	return &InmemProvider{hub: h, self: self.Clone(), q: newEventQueue(), view: map[string]Member{}}
}

// NewMember returns a provider for self that the hub's other members see
// (its joins, failures and departures) but that sees none of them: its
// Events channel is closed and its Members are none. Many members that
// nobody asks to observe (a run's compute nodes, followed only by their
// cluster's watcher) then cost the hub no view and no event each.
func (h *Hub) NewMember(self Member) *InmemProvider {
	p := h.NewProvider(self)
	p.blind = true
	p.q.close()
	return p
}

// Local returns the member this provider speaks for.
func (p *InmemProvider) Local() Member { return p.self.Clone() }

// Join enters the hub. Seeds are ignored: every member of a hub can reach
// every other one unless a partition says otherwise. Joining twice is a
// no-op; joining under a name already live in the hub is an error.
func (p *InmemProvider) Join(ctx context.Context, _ []string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("membership: join %q: %w", p.self.Name, err)
	}
	h := p.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if p.gone {
		return ErrClosed
	}
	if p.joined {
		return nil
	}
	if other, ok := h.live[p.self.Name]; ok && other != p {
		return fmt.Errorf("membership: join %q: a live member already has this name", p.self.Name)
	}
	h.live[p.self.Name] = p
	p.joined = true
	if p.blind {
		h.blindLocked(p, Join)
		return nil
	}
	h.recomputeLocked(nil)
	return nil
}

// blindLocked tells the observers on p's island that the blind member p
// joined or went away (why), in observer-name order: what recomputeLocked
// would queue, without recomputing every view (a blind member changes no
// view but the observers').
func (h *Hub) blindLocked(p *InmemProvider, kind EventKind) {
	var obs []string
	for name, o := range h.live {
		if !o.blind {
			obs = append(obs, name)
		}
	}
	sort.Strings(obs)
	for _, name := range obs {
		o := h.live[name]
		if kind == Join {
			if h.island[name] == h.island[p.self.Name] {
				o.view[p.self.Name] = p.self
				o.q.push(Event{Kind: Join, Member: p.self.Clone()})
			}
			continue
		}
		if m, ok := o.view[p.self.Name]; ok {
			delete(o.view, p.self.Name)
			o.q.push(Event{Kind: kind, Member: m.Clone()})
		}
	}
}

// Members returns the members this provider currently sees, sorted by name.
func (p *InmemProvider) Members() []Member {
	p.hub.mu.Lock()
	defer p.hub.mu.Unlock()
	ms := make([]Member, 0, len(p.view))
	for _, m := range p.view {
		ms = append(ms, m.Clone())
	}
	return sortMembers(ms)
}

// Events returns the provider's event channel.
func (p *InmemProvider) Events() <-chan Event { return p.q.out }

// Leave departs gracefully: the others see a Leave event.
func (p *InmemProvider) Leave(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("membership: leave %q: %w", p.self.Name, err)
	}
	p.hub.remove(p, Leave)
	return nil
}

// Close departs abruptly: the others see a Fail event.
func (p *InmemProvider) Close() error {
	p.hub.remove(p, Fail)
	return nil
}

// remove takes p out of the hub for the given reason and closes its queue.
func (h *Hub) remove(p *InmemProvider, why EventKind) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p.gone {
		return
	}
	p.gone = true
	p.view = map[string]Member{}
	p.q.close()
	if p.joined && h.live[p.self.Name] == p {
		delete(h.live, p.self.Name)
		if p.blind {
			h.blindLocked(p, why)
			return
		}
		h.recomputeLocked(map[string]EventKind{p.self.Name: why})
	}
}

// Fail crashes the named member: its provider stops (its Events channel
// closes) and every other member sees a Fail event.
func (h *Hub) Fail(name string) error {
	h.mu.Lock()
	p, ok := h.live[name]
	h.mu.Unlock()
	if !ok {
		return fmt.Errorf("membership: fail %q: no such live member", name)
	}
	h.remove(p, Fail)
	return nil
}

// Partition splits the hub into islands: each group is one island, and the
// members named in no group (including members joining later) form one more
// island together. Members on different islands see each other fail;
// members on the same island are unaffected. A new Partition replaces the
// previous one.
func (h *Hub) Partition(groups ...[]string) error {
	island := map[string]int{}
	for i, g := range groups {
		for _, name := range g {
			if j, dup := island[name]; dup && j != i+1 {
				return fmt.Errorf("membership: partition: %q is in two groups", name)
			}
			island[name] = i + 1
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.island = island
	h.recomputeLocked(nil)
	return nil
}

// Heal removes any partition: members see each other join again.
func (h *Hub) Heal() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.island = map[string]int{}
	h.recomputeLocked(nil)
}

// Update replaces the data (Role, Cluster, Addr, Meta) of the live member
// m.Name; the members that see it get an Update event.
func (h *Hub) Update(m Member) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.live[m.Name]
	if !ok {
		return fmt.Errorf("membership: update %q: no such live member", m.Name)
	}
	p.self = m.Clone()
	h.recomputeLocked(nil)
	return nil
}

// Members returns every live member of the hub regardless of partitions,
// sorted by name.
func (h *Hub) Members() []Member {
	h.mu.Lock()
	defer h.mu.Unlock()
	ms := make([]Member, 0, len(h.live))
	for _, p := range h.live {
		ms = append(ms, p.self.Clone())
	}
	return sortMembers(ms)
}

// recomputeLocked brings every live provider's view in line with the hub
// and queues the differences as events. why names the reason for members
// that just went away on purpose (Leave or Fail); any other disappearance
// is a partition, reported as Fail.
func (h *Hub) recomputeLocked(why map[string]EventKind) {
	names := make([]string, 0, len(h.live))
	for name := range h.live {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, observer := range names {
		p := h.live[observer]
		if p.blind {
			continue
		}
		next := make(map[string]Member, len(names))
		for _, name := range names {
			if h.island[name] == h.island[observer] {
				next[name] = h.live[name].self
			}
		}
		// Departures first, in name order, then arrivals and updates.
		var gone []string
		for name := range p.view {
			if _, ok := next[name]; !ok {
				gone = append(gone, name)
			}
		}
		sort.Strings(gone)
		for _, name := range gone {
			kind := Fail
			if k, ok := why[name]; ok {
				kind = k
			}
			p.q.push(Event{Kind: kind, Member: p.view[name].Clone()})
		}
		for _, name := range names {
			m, ok := next[name]
			if !ok {
				continue
			}
			old, seen := p.view[name]
			switch {
			case !seen:
				p.q.push(Event{Kind: Join, Member: m.Clone()})
			case !old.Equal(m):
				p.q.push(Event{Kind: Update, Member: m.Clone()})
			}
		}
		p.view = next
	}
}
