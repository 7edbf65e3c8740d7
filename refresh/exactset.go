package refresh

// hashSet holds the distinct hashes a group has not yet given its sketch
// while the sketch is exact (EMPTY or EXPLICIT, a sorted set of at most the
// explicit cutoff's number of values). Inserting into it costs the same
// whatever the order of the values, where adding to an EXPLICIT sketch
// means sorting; most busy groups pass the cutoff and go to registers
// without ever sorting (see group.addHash).
type hashSet struct {
	slots []uint64 // open addressing, a power of two in length; 0 is an empty slot
	n     int      // values held, the 0 value included
	zero  bool     // the value 0 is held
	cache *slotCache
}

// slotCache keeps the tables of sets that grew or were done with (their
// groups' sketches went to registers) for the next sets of the same
// stream: a busy group's set then starts at the size the previous one
// reached, without growing step by step, and without garbage.
type slotCache struct {
	free map[int][][]uint64 // cleared tables by length
	last int                // the length of the last table released by a done set
}

func (c *slotCache) get(n int) []uint64 {
	if f := c.free[n]; len(f) > 0 {
		t := f[len(f)-1]
		c.free[n] = f[:len(f)-1]
		return t
	}
	return make([]uint64, n)
}

func (c *slotCache) put(t []uint64) {
	if c.free == nil {
		c.free = make(map[int][][]uint64)
	}
	if len(c.free[len(t)]) < 64 {
		clear(t)
		c.free[len(t)] = append(c.free[len(t)], t)
	}
}

// release gives the set's table to the cache; the set must not be used
// again.
func (s *hashSet) release() {
	if s.cache != nil && s.slots != nil {
		s.cache.last = len(s.slots)
		s.cache.put(s.slots)
	}
	s.slots = nil
}

// add inserts x and reports whether it was new.
func (s *hashSet) add(x uint64) bool {
	if x == 0 {
		if s.zero {
			return false
		}
		s.zero = true
		s.n++
		return true
	}
	if 4*(s.n+1) > 3*len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	// Hashes are well mixed already, but the multiplication keeps any input
	// (small integers, say) spread over the table.
	for i := (x * 0x9e3779b97f4a7c15) >> 32 & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case 0:
			s.slots[i] = x
			s.n++
			return true
		case x:
			return false
		}
	}
}

func (s *hashSet) grow() {
	old := s.slots
	switch {
	case s.cache == nil:
		s.slots = make([]uint64, max(16, 2*len(old)))
	case old == nil && len(s.cache.free[s.cache.last]) > 0:
		s.slots = s.cache.get(s.cache.last)
		return
	default:
		s.slots = s.cache.get(max(16, 2*len(old)))
	}
	mask := uint64(len(s.slots) - 1)
	for _, x := range old {
		if x == 0 {
			continue
		}
		i := (x * 0x9e3779b97f4a7c15) >> 32 & mask
		for s.slots[i] != 0 {
			i = (i + 1) & mask
		}
		s.slots[i] = x
	}
	if s.cache != nil && old != nil {
		s.cache.put(old)
	}
}

// appendTo appends the values held, in no particular order.
func (s *hashSet) appendTo(dst []uint64) []uint64 {
	if s.zero {
		dst = append(dst, 0)
	}
	for _, x := range s.slots {
		if x != 0 {
			dst = append(dst, x)
		}
	}
	return dst
}

// reset empties the set, keeping its table.
func (s *hashSet) reset() {
	clear(s.slots)
	s.n, s.zero = 0, false
}
