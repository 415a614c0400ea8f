package docker

import (
	"fmt"
	"net/netip"
)

// Default range of the second octet of a run's 10.X.0.0/16.
const (
	DefaultFirstOctet = 200
	DefaultLastOctet  = 250
)

// PickRunSubnet returns the first 10.X.0.0/16 with X in [first, last] that
// overlaps none of used (existing Docker networks, host addresses).
func PickRunSubnet(used []netip.Prefix, first, last int) (netip.Prefix, error) {
	if first < 0 || last > 255 || first > last {
		return netip.Prefix{}, fmt.Errorf("docker backend: bad subnet octet range %d..%d", first, last)
	}
	for x := first; x <= last; x++ {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(x), 0, 0}), 16)
		free := true
		for _, u := range used {
			if u.IsValid() && u.Overlaps(p) {
				free = false
				break
			}
		}
		if free {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("docker backend: no free 10.X.0.0/16 for X in %d..%d: all overlap existing networks or host addresses", first, last)
}

// AddressPlan assigns fixed addresses inside a run's /16: the control
// subnet 10.X.0.0/24 (gateway 10.X.0.1) and one /24 per cluster,
// 10.X.(i+1).0/24 for cluster i. It is not safe for concurrent use.
type AddressPlan struct {
	run      netip.Prefix
	clusters []string
	index    map[string]int // cluster -> third octet
	taken    map[netip.Addr]string
	next     map[int]int // third octet -> next host number to try
}

// MaxClusters is the number of cluster subnets a run's /16 holds.
const MaxClusters = 255

// NewAddressPlan plans addresses in run (a /16) for the given clusters.
func NewAddressPlan(run netip.Prefix, clusters []string) (*AddressPlan, error) {
	if !run.Addr().Is4() || run.Bits() != 16 || run.Masked() != run {
		return nil, fmt.Errorf("docker backend: run subnet %v is not an IPv4 /16", run)
	}
	if len(clusters) > MaxClusters {
		return nil, fmt.Errorf("docker backend: %d clusters, a run holds at most %d", len(clusters), MaxClusters)
	}
	p := &AddressPlan{run: run, clusters: append([]string(nil), clusters...), index: map[string]int{},
		taken: map[netip.Addr]string{}, next: map[int]int{}}
	for i, c := range clusters {
		if c == "" {
			return nil, fmt.Errorf("docker backend: cluster %d has no name", i)
		}
		if _, dup := p.index[c]; dup {
			return nil, fmt.Errorf("docker backend: cluster %q listed twice", c)
		}
		p.index[c] = i + 1
	}
	p.taken[p.Gateway()] = "gateway"
	return p, nil
}

// Run returns the run's /16.
func (p *AddressPlan) Run() netip.Prefix { return p.run }

// Gateway returns the bridge's address, 10.X.0.1.
func (p *AddressPlan) Gateway() netip.Addr { return p.addr(0, 1) }

// Control returns the control-plane subnet 10.X.0.0/24.
func (p *AddressPlan) Control() netip.Prefix { return netip.PrefixFrom(p.addr(0, 0), 24) }

// Cluster returns the /24 of a cluster; the empty name is the control subnet.
func (p *AddressPlan) Cluster(name string) (netip.Prefix, error) {
	third, err := p.third(name)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(p.addr(third, 0), 24), nil
}

// Clusters returns every cluster's /24 by name.
func (p *AddressPlan) Clusters() map[string]netip.Prefix {
	m := make(map[string]netip.Prefix, len(p.clusters))
	for _, c := range p.clusters {
		m[c] = netip.PrefixFrom(p.addr(p.index[c], 0), 24)
	}
	return m
}

// Assign returns the next free address of the cluster's subnet (the control
// subnet for "") and marks it taken by owner. Hosts are numbered from .1
// (.2 in the control subnet, whose .1 is the gateway) to .254.
func (p *AddressPlan) Assign(cluster, owner string) (netip.Addr, error) {
	third, err := p.third(cluster)
	if err != nil {
		return netip.Addr{}, err
	}
	host := p.next[third]
	if host == 0 {
		host = 1
	}
	for ; host <= 254; host++ {
		a := p.addr(third, host)
		if _, used := p.taken[a]; !used {
			p.taken[a] = owner
			p.next[third] = host + 1
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("docker backend: subnet %v of cluster %q is full (254 hosts)", netip.PrefixFrom(p.addr(third, 0), 24), cluster)
}

// Reserve marks a caller-chosen address as taken by owner. It must lie in
// the cluster's subnet, be a host address (.1-.254) and be free.
func (p *AddressPlan) Reserve(cluster string, a netip.Addr, owner string) error {
	sub, err := p.Cluster(cluster)
	if err != nil {
		return err
	}
	if !sub.Contains(a) {
		return fmt.Errorf("docker backend: address %v of %s is outside the subnet %v of cluster %q", a, owner, sub, cluster)
	}
	if last := a.As4()[3]; last == 0 || last == 255 {
		return fmt.Errorf("docker backend: address %v of %s is not a host address", a, owner)
	}
	if other, used := p.taken[a]; used {
		return fmt.Errorf("docker backend: address %v of %s is already taken by %s", a, owner, other)
	}
	p.taken[a] = owner
	return nil
}

// Release frees an address again (for a container that failed to start).
func (p *AddressPlan) Release(a netip.Addr) {
	if a == p.Gateway() {
		return
	}
	delete(p.taken, a)
	third := int(a.As4()[2])
	if host := int(a.As4()[3]); host < p.next[third] {
		p.next[third] = host
	}
}

func (p *AddressPlan) third(cluster string) (int, error) {
	if cluster == "" {
		return 0, nil
	}
	i, ok := p.index[cluster]
	if !ok {
		return 0, fmt.Errorf("docker backend: unknown cluster %q (the run has %v)", cluster, p.clusters)
	}
	return i, nil
}

func (p *AddressPlan) addr(third, host int) netip.Addr {
	b := p.run.Addr().As4()
	return netip.AddrFrom4([4]byte{b[0], b[1], byte(third), byte(host)})
}
