package sketch

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func mustFreq(t testing.TB, capacity int) *Freq {
	t.Helper()
	f, err := NewFreq(capacity)
	if err != nil {
		t.Fatalf("NewFreq(%d): %v", capacity, err)
	}
	return f
}

func mustAdd(t testing.TB, f *Freq, item []byte, count int64) {
	t.Helper()
	if err := f.Add(item, count); err != nil {
		t.Fatalf("Add(%q, %d): %v", item, count, err)
	}
}

func mustMerge(t testing.TB, f, o *Freq) {
	t.Helper()
	if err := f.Merge(o); err != nil {
		t.Fatalf("Merge: %v", err)
	}
}

func marshalFreq(t testing.TB, f *Freq) []byte {
	t.Helper()
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	return b
}

func decodeFreqT(t testing.TB, b []byte) *Freq {
	t.Helper()
	var f Freq
	if err := f.UnmarshalBinary(b); err != nil {
		t.Fatalf("UnmarshalBinary(%x): %v", b, err)
	}
	return &f
}

// key8 is v as 8 big-endian bytes, the encoding callers use for int64.
func key8(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// truth is the exact count of every item added, the NULL item under its
// own field.
type truth struct {
	counts map[string]int64
	null   int64
}

func newTruth() *truth { return &truth{counts: map[string]int64{}} }

func (x *truth) n() int64 {
	n := x.null
	for _, c := range x.counts {
		n += c
	}
	return n
}

func (x *truth) merge(o *truth) {
	for k, c := range o.counts {
		x.counts[k] += c
	}
	x.null += o.null
}

// stream adds events events to f and x: items from a Zipf distribution
// over universe values (offset by base), a NULL one time in nullEvery,
// with counts 1 or, for weighted streams, 1..maxCount.
type stream struct {
	zipf      *rand.Zipf
	r         *rand.Rand
	base      uint64
	nullEvery int
	maxCount  int64
}

func newStream(seed uint64, s float64, universe uint64) *stream {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return &stream{zipf: rand.NewZipf(r, s, 1, universe-1), r: r, nullEvery: 50, maxCount: 1}
}

func (s *stream) add(t testing.TB, f *Freq, x *truth, events int) {
	t.Helper()
	for range events {
		count := 1 + s.r.Int64N(s.maxCount)
		if s.nullEvery > 0 && s.r.IntN(s.nullEvery) == 0 {
			if err := f.AddNull(count); err != nil {
				t.Fatal(err)
			}
			x.null += count
			continue
		}
		item := key8(s.base + s.zipf.Uint64())
		mustAdd(t, f, item, count)
		x.counts[string(item)] += count
	}
}

// checkFreq verifies every documented guarantee of f against the exact
// counts: lower <= true <= upper for every item added, the NULL one and
// an item never added; upper = lower + MaxError; at most Capacity() items;
// sum of lowers + (m+1)·MaxError <= N, hence MaxError <= N/(m+1).
func checkFreq(t testing.TB, f *Freq, x *truth) {
	t.Helper()
	n, maxErr := f.N(), f.MaxError()
	if want := x.n(); n != want {
		t.Fatalf("N %d, want %d", n, want)
	}
	items := f.Items()
	if len(items) > f.Capacity() {
		t.Fatalf("%d items, capacity %d", len(items), f.Capacity())
	}
	checkFreqSums(t, f, items)
	bounds := map[string]FreqItem{}
	null := FreqItem{Upper: maxErr}
	for _, it := range items {
		if it.Null {
			null = it
		} else {
			bounds[string(it.Item)] = it
		}
	}
	checkBound(t, "NULL", null, x.null)
	for k, c := range x.counts {
		b, ok := bounds[k]
		if !ok {
			b.Upper = maxErr
		}
		checkBound(t, k, b, c)
	}
	for k, b := range bounds {
		if _, ok := x.counts[k]; !ok {
			t.Fatalf("item %x tracked with [%d, %d] but never added", k, b.Lower, b.Upper)
		}
	}
	lo, hi := f.Bounds([]byte("never added"))
	checkBound(t, "never added", FreqItem{Lower: lo, Upper: hi}, 0)
	if lo != 0 || hi != maxErr {
		t.Fatalf("untracked item: [%d, %d], MaxError %d", lo, hi, maxErr)
	}
}

// checkFreqSums checks what holds without knowing the true counts: each
// item's bounds are 1 <= lower <= upper <= lower + MaxError, counters
// (upper − MaxError) are positive and sum to at most N − (m+1)·MaxError,
// lower bounds sum to at most N, and Bounds agrees with Items.
func checkFreqSums(t testing.TB, f *Freq, items []FreqItem) {
	t.Helper()
	n, maxErr, m := f.N(), f.MaxError(), int64(f.Capacity())
	if len(items) > f.Capacity() || maxErr < 0 || maxErr > n/(m+1) {
		t.Fatalf("%d items, capacity %d, MaxError %d, N %d", len(items), m, maxErr, n)
	}
	var counts, lowers int64
	for _, it := range items {
		if it.Lower < 1 || it.Upper < it.Lower || it.Upper-maxErr < 1 || it.Upper > it.Lower+maxErr {
			t.Fatalf("item %q bounds [%d, %d] with MaxError %d", it.Item, it.Lower, it.Upper, maxErr)
		}
		lo, hi := f.Bounds(it.Item)
		if it.Null {
			lo, hi = f.NullBounds()
		}
		if lo != it.Lower || hi != it.Upper {
			t.Fatalf("Bounds(%q) = [%d, %d], Items says [%d, %d]", it.Item, lo, hi, it.Lower, it.Upper)
		}
		counts += it.Upper - maxErr
		lowers += it.Lower
	}
	if counts > n-(m+1)*maxErr || lowers > n {
		t.Fatalf("counters sum to %d, lowers to %d, MaxError %d, capacity %d, N %d", counts, lowers, maxErr, m, n)
	}
}

func checkBound(t testing.TB, item string, b FreqItem, exact int64) {
	t.Helper()
	if b.Lower > exact || exact > b.Upper {
		t.Fatalf("item %x: true count %d outside [%d, %d]", item, exact, b.Lower, b.Upper)
	}
}

func TestNewFreqParams(t *testing.T) {
	for _, m := range []int{0, -1, MaxFreqCapacity + 1} {
		if _, err := NewFreq(m); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("NewFreq(%d): %v, want ErrInvalidParams", m, err)
		}
	}
	for _, m := range []int{1, MaxFreqCapacity} {
		if f := mustFreq(t, m); f.Capacity() != m || f.N() != 0 || f.MaxError() != 0 {
			t.Errorf("NewFreq(%d): capacity %d, N %d, MaxError %d", m, f.Capacity(), f.N(), f.MaxError())
		}
	}
}

// Up to capacity distinct items the summary is exact.
func TestFreqExactBelowCapacity(t *testing.T) {
	f := mustFreq(t, 4)
	mustAdd(t, f, []byte("b"), 3)
	mustAdd(t, f, []byte("a"), 3)
	mustAdd(t, f, []byte(""), 5)
	if err := f.AddNull(1); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, f, []byte("b"), 0)
	want := []FreqItem{
		{Item: []byte{}, Lower: 5, Upper: 5},
		{Item: []byte("a"), Lower: 3, Upper: 3},
		{Item: []byte("b"), Lower: 3, Upper: 3},
		{Null: true, Lower: 1, Upper: 1},
	}
	if got := f.Items(); !slices.EqualFunc(got, want, sameFreqItem) {
		t.Fatalf("Items() = %v, want %v", got, want)
	}
	if f.N() != 12 || f.MaxError() != 0 {
		t.Fatalf("N %d MaxError %d", f.N(), f.MaxError())
	}
	got, complete := f.Candidates(2)
	if !complete || !slices.EqualFunc(got, want[:3], sameFreqItem) {
		t.Fatalf("Candidates(2) = %v, %t; want the three items with counts >= 3", got, complete)
	}
	if got, complete := f.Candidates(9); !complete || len(got) != 4 {
		t.Fatalf("Candidates(9) = %v, %t", got, complete)
	}
	if got := f.Top(2); !slices.EqualFunc(got, want[:2], sameFreqItem) {
		t.Fatalf("Top(2) = %v", got)
	}
	if len(f.Top(-1)) != 0 || len(f.Top(0)) != 0 || len(f.Top(10)) != 4 {
		t.Fatal("Top with k outside [1, len]")
	}
}

func sameFreqItem(a, b FreqItem) bool {
	return bytes.Equal(a.Item, b.Item) && (a.Item == nil) == (b.Item == nil) &&
		a.Null == b.Null && a.Lower == b.Lower && a.Upper == b.Upper
}

// The smallest case worked by hand: capacity 2, items a:5, b:3, c:2, d:1.
// Merging {a:5, b:3} and {c:2, d:1} (each exact) gives four counters; the
// third largest, 2, is subtracted: a:3, b:1, MaxError 2.
func TestFreqMergeByHand(t *testing.T) {
	x, y := mustFreq(t, 2), mustFreq(t, 2)
	mustAdd(t, x, []byte("a"), 5)
	mustAdd(t, x, []byte("b"), 3)
	mustAdd(t, y, []byte("c"), 2)
	mustAdd(t, y, []byte("d"), 1)
	mustMerge(t, x, y)
	// Plain Misra–Gries would give a [3, 5] and b [1, 3]; both were
	// tracked since the start, so their counts are known exactly.
	want := []FreqItem{{Item: []byte("a"), Lower: 5, Upper: 5}, {Item: []byte("b"), Lower: 3, Upper: 3}}
	if got := x.Items(); !slices.EqualFunc(got, want, sameFreqItem) || x.MaxError() != 2 || x.N() != 11 {
		t.Fatalf("Items() = %v, MaxError %d, N %d", got, x.MaxError(), x.N())
	}
	if lo, hi := x.Bounds([]byte("c")); lo != 0 || hi != 2 {
		t.Fatalf("Bounds(c) = %d, %d", lo, hi)
	}
	if got, complete := x.Candidates(1); len(got) != 1 || !complete {
		t.Fatalf("Candidates(1) = %v, %t; want a, complete", got, complete)
	}
	if got, complete := x.Candidates(2); len(got) != 2 || !complete {
		t.Fatalf("Candidates(2) = %v, %t; want a and b, complete", got, complete)
	}
	// A new item e occurs 4 times; it may have occurred up to Δ = 2 times
	// before, so its bounds are [4, 6]. With three counters (a 3, b 1,
	// e 4) for capacity 2, reads cut the third largest, 1: b is dropped,
	// MaxError becomes 3, a keeps [5, 5].
	mustAdd(t, x, []byte("e"), 4)
	if lo, hi := x.Bounds([]byte("e")); lo != 4 || hi != 6 || x.MaxError() != 3 {
		t.Fatalf("Bounds(e) = %d, %d, MaxError %d", lo, hi, x.MaxError())
	}
	if lo, hi := x.Bounds([]byte("b")); lo != 0 || hi != 3 {
		t.Fatalf("Bounds(b) = %d, %d", lo, hi)
	}
	if got, complete := x.Candidates(1); len(got) != 2 || !complete {
		t.Fatalf("Candidates(1) = %v, %t; want a and e, complete", got, complete)
	}
}

// Bounds hold after every batch of adds, for small capacities (many
// reductions), unit and weighted counts, skewed and flat streams.
func TestFreqBoundsRandomAdds(t *testing.T) {
	for _, tc := range []struct {
		capacity int
		s        float64
		maxCount int64
	}{
		{1, 1.1, 1}, {2, 1.1, 1}, {7, 1.5, 1}, {16, 1.01, 1}, {64, 1.1, 1},
		{16, 1.1, 100}, {64, 1.01, 1000}, {5, 3, 7},
	} {
		f, x := mustFreq(t, tc.capacity), newTruth()
		s := newStream(uint64(tc.capacity)*31+uint64(tc.maxCount), tc.s, 5000)
		s.maxCount = tc.maxCount
		for range 20 {
			s.add(t, f, x, 500)
			checkFreq(t, f, x)
			checkCandidates(t, f, x)
		}
		if f.MaxError() == 0 {
			t.Errorf("capacity %d: MaxError 0, the test never reduced", tc.capacity)
		}
	}
}

// Ninety daily summaries, merged one after the other (as a 90-day query
// does), pairwise as a tree, and after a round trip through bytes.
func TestFreqBoundsManyMerges(t *testing.T) {
	const days, capacity = 90, 32
	daily := make([]*Freq, days)
	truths := make([]*truth, days)
	total, totalX := mustFreq(t, capacity), newTruth()
	for d := range days {
		daily[d], truths[d] = mustFreq(t, capacity), newTruth()
		s := newStream(uint64(d), 1.05, 3000)
		s.base = uint64(d % 7 * 100) // the popular items drift from day to day
		s.add(t, daily[d], truths[d], 1000+d*10)
		checkFreq(t, daily[d], truths[d])
		back := decodeFreqT(t, marshalFreq(t, daily[d]))
		mustMerge(t, total, back)
		totalX.merge(truths[d])
		checkFreq(t, total, totalX)
		checkCandidates(t, total, totalX)
	}
	tree := mergeTree(t, daily)
	checkFreq(t, tree, totalX)
	checkCandidates(t, tree, totalX)
	if bound := total.N() / (capacity + 1); total.MaxError() > bound {
		t.Fatalf("MaxError %d > N/(m+1) = %d", total.MaxError(), bound)
	}
	t.Logf("90 days: N %d, MaxError %d (sequential), %d (tree), N/(m+1) %d",
		total.N(), total.MaxError(), tree.MaxError(), total.N()/(capacity+1))
}

func mergeTree(t testing.TB, fs []*Freq) *Freq {
	t.Helper()
	if len(fs) == 1 {
		return fs[0].Clone()
	}
	l := mergeTree(t, fs[:len(fs)/2])
	mustMerge(t, l, mergeTree(t, fs[len(fs)/2:]))
	return l
}

// checkCandidates: when Candidates says it is complete, it holds every
// item of the true top k, ties included; it holds exactly the tracked
// items whose upper bound reaches the k-th largest lower bound.
func checkCandidates(t testing.TB, f *Freq, x *truth) {
	t.Helper()
	for _, k := range []int{1, 3, 10} {
		got, complete := f.Candidates(k)
		items := f.Items()
		if len(items) >= k {
			l := items[k-1].Lower
			want := slices.DeleteFunc(slices.Clone(items), func(it FreqItem) bool { return it.Upper < l })
			if !slices.EqualFunc(got, want, sameFreqItem) {
				t.Fatalf("Candidates(%d) = %d items, want the %d with upper >= %d", k, len(got), len(want), l)
			}
			if complete != (f.MaxError() < l) {
				t.Fatalf("Candidates(%d) complete %t with MaxError %d, L %d", k, complete, f.MaxError(), l)
			}
		}
		if !complete {
			continue
		}
		in := map[string]bool{}
		nullIn := false
		for _, it := range got {
			in[string(it.Item)] = in[string(it.Item)] || !it.Null
			nullIn = nullIn || it.Null
		}
		kth := kthTrue(x, k)
		for item, c := range x.counts {
			if c >= kth && !in[item] {
				t.Fatalf("Candidates(%d) misses %x, true count %d >= k-th %d", k, item, c, kth)
			}
		}
		if x.null >= kth && x.null > 0 && !nullIn {
			t.Fatalf("Candidates(%d) misses NULL, true count %d >= k-th %d", k, x.null, kth)
		}
	}
}

// kthTrue is the k-th largest true count (1 if fewer than k items
// occurred: then every item that occurred is in the top k).
func kthTrue(x *truth, k int) int64 {
	counts := make([]int64, 0, len(x.counts)+1)
	for _, c := range x.counts {
		counts = append(counts, c)
	}
	if x.null > 0 {
		counts = append(counts, x.null)
	}
	if len(counts) < k {
		return 1
	}
	slices.SortFunc(counts, func(a, b int64) int { return cmp.Compare(b, a) })
	return counts[k-1]
}

func TestFreqNull(t *testing.T) {
	f := mustFreq(t, 2)
	if lo, hi := f.NullBounds(); lo != 0 || hi != 0 {
		t.Fatalf("empty NullBounds = %d, %d", lo, hi)
	}
	if err := f.AddNull(4); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, f, nil, 2) // the empty item, not NULL
	if lo, hi := f.NullBounds(); lo != 4 || hi != 4 {
		t.Fatalf("NullBounds = %d, %d", lo, hi)
	}
	if lo, _ := f.Bounds(nil); lo != 2 {
		t.Fatalf("Bounds(empty) = %d", lo)
	}
	// A third item makes three counters for capacity 2: the smallest
	// (1) is cut, the NULL item keeps 3 and the empty item 1.
	mustAdd(t, f, []byte("x"), 1)
	mustMerge(t, f, mustFreq(t, 2))
	if lo, hi := f.NullBounds(); lo != 4 || hi != 4 || f.MaxError() != 1 {
		t.Fatalf("NullBounds after a cut = %d, %d, MaxError %d", lo, hi, f.MaxError())
	}
	if items := f.Items(); len(items) != 2 || !items[0].Null || items[0].Item != nil {
		t.Fatalf("Items() = %v", items)
	}
	back := decodeFreqT(t, marshalFreq(t, f))
	if !slices.EqualFunc(back.Items(), f.Items(), sameFreqItem) {
		t.Fatalf("round trip: %v, want %v", back.Items(), f.Items())
	}
}

// Reading a summary (which sees it reduced) does not change what later
// adds produce, nor the bytes.
func TestFreqReadsDoNotChangeState(t *testing.T) {
	plain, read := mustFreq(t, 8), mustFreq(t, 8)
	s1, s2 := newStream(7, 1.2, 1000), newStream(7, 1.2, 1000)
	x1, x2 := newTruth(), newTruth()
	for range 40 {
		s1.add(t, plain, x1, 37)
		s2.add(t, read, x2, 37)
		_ = read.Items()
		_, _ = read.Candidates(3)
		_ = marshalFreq(t, read)
	}
	if a, b := marshalFreq(t, plain), marshalFreq(t, read); !bytes.Equal(a, b) {
		t.Fatalf("reads changed the summary:\n%x\n%x", a, b)
	}
}

func TestFreqAddErrors(t *testing.T) {
	f := mustFreq(t, 4)
	mustAdd(t, f, []byte("a"), 1)
	before := marshalFreq(t, f)
	for name, add := range map[string]func() error{
		"negative":      func() error { return f.Add([]byte("a"), -1) },
		"negative null": func() error { return f.AddNull(-1) },
		"too long":      func() error { return f.Add(make([]byte, MaxFreqItemLen+1), 1) },
	} {
		if err := add(); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%s: %v, want ErrInvalidParams", name, err)
		}
	}
	if err := f.Add([]byte("b"), math.MaxInt64); !errors.Is(err, ErrOverflow) {
		t.Errorf("overflow: %v, want ErrOverflow", err)
	}
	if err := f.AddNull(math.MaxInt64); !errors.Is(err, ErrOverflow) {
		t.Errorf("overflow null: %v, want ErrOverflow", err)
	}
	if after := marshalFreq(t, f); !bytes.Equal(before, after) {
		t.Errorf("failed adds changed the summary")
	}
	mustAdd(t, f, make([]byte, MaxFreqItemLen), math.MaxInt64-1)
	var zero Freq
	if err := zero.Add([]byte("a"), 1); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("zero value Add: %v", err)
	}
	if _, err := zero.MarshalBinary(); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("zero value MarshalBinary: %v", err)
	}
	if zero.N() != 0 || zero.MaxError() != 0 || len(zero.Items()) != 0 {
		t.Errorf("zero value reads")
	}
}

func TestFreqMergeErrors(t *testing.T) {
	f := mustFreq(t, 4)
	mustAdd(t, f, []byte("a"), math.MaxInt64-5)
	before := marshalFreq(t, f)
	big := mustFreq(t, 4)
	mustAdd(t, big, []byte("b"), 6)
	for name, tc := range map[string]struct {
		o    *Freq
		want error
	}{
		"nil":      {nil, ErrInvalidParams},
		"zero":     {&Freq{}, ErrInvalidParams},
		"smaller":  {mustFreq(t, 3), ErrIncompatible},
		"overflow": {big, ErrOverflow},
	} {
		if err := f.Merge(tc.o); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if after := marshalFreq(t, f); !bytes.Equal(before, after) {
		t.Errorf("failed merges changed the summary")
	}
	var zero Freq
	if err := zero.Merge(f); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("merge into zero value: %v", err)
	}
}

// A summary merges into one of smaller capacity (the bounds still hold),
// and into itself (counts double).
func TestFreqMergeCapacities(t *testing.T) {
	big, x := mustFreq(t, 64), newTruth()
	newStream(3, 1.1, 2000).add(t, big, x, 5000)
	small := mustFreq(t, 16)
	mustMerge(t, small, big)
	checkFreq(t, small, x)
	if small.MaxError() > small.N()/17 {
		t.Fatalf("MaxError %d > N/(m+1)", small.MaxError())
	}
	self := big.Clone()
	mustMerge(t, self, self)
	x.merge(x)
	checkFreq(t, self, x)
}

func TestFreqMarshalRoundTrip(t *testing.T) {
	// Below capacity the bytes do not depend on the order of the adds.
	a, b := mustFreq(t, 16), mustFreq(t, 16)
	for i := range 10 {
		mustAdd(t, a, key8(uint64(i)), int64(i+1))
		mustAdd(t, b, key8(uint64(9-i)), int64(10-i))
	}
	if ea, eb := marshalFreq(t, a), marshalFreq(t, b); !bytes.Equal(ea, eb) {
		t.Fatalf("same counts, different bytes:\n%x\n%x", ea, eb)
	}
	// Over capacity (with up to 2m counters held) the decoded summary reads
	// as the original and re-encodes to the same bytes.
	for _, m := range []int{1, 5, 100} {
		f, x := mustFreq(t, m), newTruth()
		newStream(uint64(m), 1.1, 10000).add(t, f, x, 3000)
		enc := marshalFreq(t, f)
		back := decodeFreqT(t, enc)
		if !slices.EqualFunc(back.Items(), f.Items(), sameFreqItem) ||
			back.MaxError() != f.MaxError() || back.N() != f.N() || back.Capacity() != m {
			t.Fatalf("capacity %d: decoded summary differs", m)
		}
		if again := marshalFreq(t, back); !bytes.Equal(again, enc) {
			t.Fatalf("capacity %d: re-encoding differs", m)
		}
		checkFreq(t, back, x)
	}
}

// The layout of "Frequent items byte layout" in the package
// documentation.
func TestFreqMarshalLayout(t *testing.T) {
	f := mustFreq(t, 3)
	mustAdd(t, f, key8(7), 300)
	mustAdd(t, f, []byte("b"), 2)
	mustAdd(t, f, []byte("a"), 1)
	mustAdd(t, f, []byte("c"), 1)
	if err := f.AddNull(5); err != nil {
		t.Fatal(err)
	}
	mustMerge(t, f, mustFreq(t, 3))
	// Counters 300, 5 (NULL), 2, 1, 1, errors 0; the 4th largest, 1, is
	// cut.
	const want = "46 01 01 03 b5 02 01 02 04 00" +
		" 08 0000000000000007 ab 02 00 01 62 01 00"
	got := marshalFreq(t, f)
	wantBytes, err := hex.DecodeString(stripSpaces(want))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, wantBytes) {
		t.Fatalf("bytes %x, want %x", got, wantBytes)
	}
	want7, wantB := FreqItem{Item: key8(7), Lower: 300, Upper: 300}, FreqItem{Item: []byte("b"), Lower: 2, Upper: 2}
	wantNull := FreqItem{Null: true, Lower: 5, Upper: 5}
	if items := f.Items(); !slices.EqualFunc(items, []FreqItem{want7, wantNull, wantB}, sameFreqItem) || f.MaxError() != 1 {
		t.Fatalf("Items() = %v, MaxError %d", items, f.MaxError())
	}
}

func stripSpaces(s string) string {
	return string(bytes.ReplaceAll([]byte(s), []byte(" "), nil))
}

func TestFreqUnmarshalMalformed(t *testing.T) {
	valid := "46 01 00 04 0a 00 02 01 61 05 00 01 62 05 00" // a: 5, b: 5, N 10
	for _, tc := range []struct {
		name, hex string
		want      error
	}{
		{"empty", "", ErrTruncated},
		{"short", "46 01", ErrTruncated},
		{"tag", "47 01 00 04 00 00 00", ErrType},
		{"version", "46 02 00 04 00 00 00", ErrVersion},
		{"flags", "46 01 02 04 00 00 00", ErrCorrupt},
		{"capacity 0", "46 01 00 00 00 00 00", ErrInvalidParams},
		{"capacity too big", "46 01 00 81 80 40 00 00 00", ErrInvalidParams},
		{"capacity cut short", "46 01 00 84", ErrTruncated},
		{"varint not shortest", "46 01 00 84 00 00 00 00", ErrCorrupt},
		{"varint overflow", "46 01 00 04 ffffffffffffffffff7f 00 00", ErrCorrupt},
		{"N over MaxInt64", "46 01 00 04 ffffffffffffffff ff01 00 00", ErrCorrupt},
		{"error offset over N", "46 01 00 04 01 02 00", ErrCorrupt},
		{"more items than capacity", "46 01 00 01 0a 00 02 01 61 05 00 01 62 05 00", ErrCorrupt},
		{"items and NULL over capacity", "46 01 01 02 0a 00 02 02 00 01 61 04 00 01 62 04 00", ErrCorrupt},
		{"item count past the bytes", "46 01 00 04 0a 00 03 01 61 05 00 01 62 05 00", ErrTruncated},
		{"item cut short", "46 01 00 04 0a 00 02 01 61 05 00 05 62 05 00", ErrTruncated},
		{"error cut short", "46 01 00 04 0a 00 02 01 61 05 00 01 62 05", ErrTruncated},
		{"item too long", "46 01 00 04 0a 00 01 818040 00 00", ErrCorrupt},
		{"duplicate item", "46 01 00 04 0a 00 02 01 61 05 00 01 61 05 00", ErrCorrupt},
		{"items out of order", "46 01 00 04 0a 00 02 01 62 05 00 01 61 05 00", ErrCorrupt},
		{"zero count", "46 01 00 04 0a 00 02 01 61 00 00 01 62 05 00", ErrCorrupt},
		{"count over N", "46 01 00 04 0a 00 02 01 61 0b 00 01 62 05 00", ErrCorrupt},
		{"counts sum over N", "46 01 00 04 0a 00 02 01 61 06 00 01 62 05 00", ErrCorrupt},
		{"error over the offset", "46 01 00 04 0a 00 02 01 61 05 01 01 62 05 00", ErrCorrupt},
		{"NULL count 0", "46 01 01 04 0a 00 00 00 00", ErrCorrupt},
		{"NULL count over N", "46 01 01 04 0a 00 00 0b 00", ErrCorrupt},
		{"NULL error over the offset", "46 01 01 04 0a 00 00 05 01", ErrCorrupt},
		{"error offset too big", "46 01 00 04 0a 01 02 01 61 03 00 01 62 03 00", ErrCorrupt},
		{"trailing bytes", valid + " 00", ErrCorrupt},
	} {
		in, err := hex.DecodeString(stripSpaces(tc.hex))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		f := mustFreq(t, 2)
		mustAdd(t, f, []byte("keep"), 3)
		before := marshalFreq(t, f)
		if err := f.UnmarshalBinary(in); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if !bytes.Equal(marshalFreq(t, f), before) {
			t.Errorf("%s: receiver changed", tc.name)
		}
	}
	in, _ := hex.DecodeString(stripSpaces(valid))
	f := decodeFreqT(t, in)
	if lo, hi := f.Bounds([]byte("a")); lo != 5 || hi != 5 || f.N() != 10 {
		t.Fatalf("valid input: Bounds(a) = %d, %d, N %d", lo, hi, f.N())
	}
	// The largest error offset allowed: counters 2 + 3 plus (4+1)·1 is 10.
	in, _ = hex.DecodeString(stripSpaces("46 01 00 04 0a 01 02 01 61 02 00 01 62 03 01"))
	f = decodeFreqT(t, in)
	if lo, hi := f.Bounds([]byte("b")); lo != 3 || hi != 4 || f.MaxError() != 1 {
		t.Fatalf("Bounds(b) = %d, %d, MaxError %d; want 3, 4, 1", lo, hi, f.MaxError())
	}
}

func TestKthLargest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		n := 1 + r.IntN(3000)
		a := make([]int64, n)
		spread := []int64{1, 3, 1000, math.MaxInt64}[trial%4]
		for i := range a {
			a[i] = r.Int64N(spread) + 1
		}
		if trial%5 == 0 {
			slices.Sort(a) // sorted and reversed inputs
		}
		if trial%10 == 0 {
			slices.Reverse(a)
		}
		sorted := slices.Clone(a)
		slices.SortFunc(sorted, func(x, y int64) int { return cmp.Compare(y, x) })
		k := 1 + r.IntN(n)
		if got := kthLargest(a, k); got != sorted[k-1] {
			t.Fatalf("trial %d: kthLargest(%d of %d) = %d, want %d", trial, k, n, got, sorted[k-1])
		}
	}
}
