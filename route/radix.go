package route

import "bytes"

// node is a node of a byte-level radix tree of path prefixes. The edge into
// a node is its label; a node holds the prefix routes whose path ends
// there. Built once by NewTable, read-only afterwards.
type node struct {
	label string
	ranks []int32 // routes ending here, ascending
	min   int32   // best rank in this subtree, to stop a walk early
	first []byte  // first byte of each child's label, same order as kids
	kids  []*node
}

// insert adds a prefix route; ranks must arrive in ascending order.
func (n *node) insert(key string, rank int32) {
	for {
		if key == "" {
			n.ranks = append(n.ranks, rank)
			return
		}
		i := bytes.IndexByte(n.first, key[0])
		if i < 0 {
			n.first = append(n.first, key[0])
			n.kids = append(n.kids, &node{label: key, ranks: []int32{rank}})
			return
		}
		kid := n.kids[i]
		l := 0
		for l < len(key) && l < len(kid.label) && key[l] == kid.label[l] {
			l++
		}
		if l < len(kid.label) {
			// Split the edge: a new node for the common part, with the
			// old child below it.
			mid := &node{label: kid.label[:l], first: []byte{kid.label[l]}, kids: []*node{kid}}
			kid.label = kid.label[l:]
			n.kids[i] = mid
			kid = mid
		}
		n, key = kid, key[l:]
	}
}

// finish computes the subtree minimums once every route is in.
func (n *node) finish() int32 {
	n.min = noRank
	if len(n.ranks) > 0 {
		n.min = n.ranks[0]
	}
	for _, k := range n.kids {
		n.min = min(n.min, k.finish())
	}
	return n.min
}

// walk offers every prefix route on the way from n down path: each is a
// prefix of path. It stops where the path leaves the tree or where nothing
// below can beat the best answer found so far.
func (s *search) walk(n *node, path []byte) {
	for n.min < s.best {
		if n.ranks != nil {
			s.offer(n.ranks)
		}
		if len(path) == 0 {
			return
		}
		i := bytes.IndexByte(n.first, path[0])
		if i < 0 {
			return
		}
		n = n.kids[i]
		if len(path) < len(n.label) || string(path[:len(n.label)]) != n.label {
			return
		}
		path = path[len(n.label):]
	}
}
