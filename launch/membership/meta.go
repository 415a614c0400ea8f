package membership

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// MaxMetaSize is the largest encoded member metadata memberlist accepts
// (memberlist.MetaMaxSize).
const MaxMetaSize = 512

// metaVersion is the first byte of encoded metadata, so the format can grow.
const metaVersion byte = 1

// metaFlagLeaving marks a member that is leaving gracefully (see
// Memberlist.Leave).
const metaFlagLeaving byte = 1 << 0

var errBadMeta = errors.New("membership: malformed member metadata")

// encodeMeta packs Role, Cluster, Addr and Meta of m compactly: a version
// byte, a flags byte, then uvarint-length-prefixed strings (role, cluster,
// addr), a uvarint pair count and the key/value pairs sorted by key.
func encodeMeta(m Member, flags byte) ([]byte, error) {
	buf := make([]byte, 0, 64)
	buf = append(buf, metaVersion, flags)
	put := func(s string) {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	put(m.Role)
	put(m.Cluster)
	put(m.Addr)
	keys := make([]string, 0, len(m.Meta))
	for k := range m.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	buf = binary.AppendUvarint(buf, uint64(len(keys)))
	for _, k := range keys {
		put(k)
		put(m.Meta[k])
	}
	if len(buf) > MaxMetaSize {
		return nil, fmt.Errorf("membership: metadata of %q is %d bytes, more than the %d memberlist allows", m.Name, len(buf), MaxMetaSize)
	}
	return buf, nil
}

// decodeMeta fills Role, Cluster, Addr and Meta of a member named name and
// returns the flags byte.
func decodeMeta(name string, b []byte) (Member, byte, error) {
	m := Member{Name: name}
	if len(b) < 2 || b[0] != metaVersion {
		return m, 0, fmt.Errorf("%w of %q: unknown version", errBadMeta, name)
	}
	flags := b[1]
	b = b[2:]
	get := func(s *string) error {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return fmt.Errorf("%w of %q: truncated", errBadMeta, name)
		}
		*s = string(b[k : k+int(n)])
		b = b[k+int(n):]
		return nil
	}
	for _, f := range []*string{&m.Role, &m.Cluster, &m.Addr} {
		if err := get(f); err != nil {
			return Member{Name: name}, 0, err
		}
	}
	count, k := binary.Uvarint(b)
	if k <= 0 || count > uint64(len(b)) {
		return Member{Name: name}, 0, fmt.Errorf("%w of %q: bad pair count", errBadMeta, name)
	}
	b = b[k:]
	if count > 0 {
		m.Meta = make(map[string]string, count)
	}
	for i := uint64(0); i < count; i++ {
		var key, val string
		if err := get(&key); err != nil {
			return Member{Name: name}, 0, err
		}
		if err := get(&val); err != nil {
			return Member{Name: name}, 0, err
		}
		m.Meta[key] = val
	}
	if len(b) != 0 {
		return Member{Name: name}, 0, fmt.Errorf("%w of %q: %d trailing bytes", errBadMeta, name, len(b))
	}
	return m, flags, nil
}
