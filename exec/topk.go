package exec

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/sketch"
	"github.com/pgsketch/pgsketch/upstream"
)

// Limits of the verified top-k: past them the query runs exactly.
const (
	// MaxTopKRounds is the most rounds of exact counting (the first, and
	// widenings).
	MaxTopKRounds = 3
	// MaxTopKCandidates is the most items counted exactly over all rounds.
	MaxTopKCandidates = 100000
)

// TopK is what a TopK plan's answer was made of.
type TopK struct {
	// Mode is plan.TopKVerified or plan.TopKApprox.
	Mode string
	// Summaries is the number of merged summaries (groups of the keys
	// other than the item), Tracked the items they track in all.
	Summaries, Tracked int
	// MaxError is the largest count an untracked item can have in any
	// summary.
	MaxError int64
	// Verified: Candidates are the items counted exactly over Rounds
	// rounds; Cut is the proof's cut (the Limit-th largest exact count, or
	// the threshold) and Bound the largest count any uncounted (group,
	// item) pair can have.
	Candidates, Rounds int
	Cut, Bound         int64
	// Rows are the summaries' bounds of the answered rows (approx mode),
	// by decreasing lower bound; Uncertain how many of them the bounds do
	// not settle the place of; Missing, for a threshold, the tracked items
	// not answered that may reach it (an untracked one may too when
	// MaxError reaches it).
	Rows      []TopKRow
	Uncertain int
	Missing   []TopKRow
}

// TopKRow is one item's bounds, Item printed as SQL would (NULL, a
// number, or a quoted string).
type TopKRow struct {
	Item         string
	Lower, Upper int64
	Uncertain    bool
}

// summary is one group's merged summary.
type summary struct {
	keys  [][]byte
	f     *sketch.Freq
	items []sketch.FreqItem
}

// runTopK answers a TopK plan: the summaries merged per group, then the
// verified answer (candidates counted exactly, the bounds' proof, Refused
// when they prove nothing) or the approximate one, shaped by PostgreSQL.
func (x *run) topK(ctx context.Context, p *plan.TopK) (*Answer, error) {
	spec := p.Spec
	if spec == nil || p.Arm == nil {
		return nil, errors.New("exec: a top-k plan without its spec and its arm")
	}
	arm := p.Arm
	if len(arm.Aggs) != 1 || arm.Aggs[0].Op != plan.MergeFreq || len(arm.Keys)+1 != len(p.Keys) {
		return nil, errors.New("exec: a top-k arm is not a summary merge over the other keys")
	}
	ans := &Answer{Merge: plan.MergeProxy, CachedRollup: true}
	mg, err := x.mergeArm(ctx, arm, ans)
	if err != nil {
		return nil, err
	}
	tk := &TopK{Mode: cmp.Or(p.Session.TopK, plan.TopKVerified)}
	var sums []summary
	for _, g := range mg.order {
		s := summary{keys: g.keys, f: g.freqs[0]}
		if s.f != nil {
			s.items = s.f.Items()
			tk.MaxError = max(tk.MaxError, s.f.MaxError())
		}
		tk.Tracked += len(s.items)
		sums = append(sums, s)
	}
	tk.Summaries = len(sums)
	var m *merged
	if tk.Mode == plan.TopKApprox {
		m, err = approxGroups(p, mg.m.elemOIDs[:len(arm.Keys)], sums, tk)
	} else {
		m, err = x.verifiedGroups(ctx, p, sums, tk)
	}
	if err != nil {
		return nil, err
	}
	res, err := m.shape(ctx, x, &p.Groups, p.Params)
	if err != nil {
		return nil, err
	}
	ans.Result, ans.Groups = *res, len(m.cols[0])
	ans.Summary = topkNotice(p, tk)
	ans.Explained = "answer: " + strings.TrimPrefix(ans.Summary, "pgsketch: ")
	return ans, nil
}

// candidate is an item to count: its bytes, or the NULL item.
type candidate struct {
	item []byte
	null bool
}

func (c candidate) key() string {
	if c.null {
		return "\x00null"
	}
	return "\x01" + string(c.item)
}

// verifiedGroups counts candidates exactly until the summaries' bounds
// prove that no uncounted item changes the answer, and returns the counted
// groups; Refused when they cannot within the limits.
func (x *run) verifiedGroups(ctx context.Context, p *plan.TopK, sums []summary, tk *TopK) (*merged, error) {
	spec := p.Spec
	counted := map[string]bool{}
	var rows [][][]byte
	var fields []pgproto3.FieldDescription
	next := firstCandidates(spec, sums)
	for round := 1; ; round++ {
		res, err := x.countCandidates(ctx, p, next)
		if err != nil {
			return nil, err
		}
		if len(res.Fields) != len(p.Keys)+1 {
			return nil, fmt.Errorf("%w: the count returned %d columns, the plan has %d keys", ErrData, len(res.Fields), len(p.Keys))
		}
		fields = res.Fields
		rows = append(rows, res.Rows...)
		for _, c := range next {
			counted[c.key()] = true
		}
		tk.Candidates += len(next)
		tk.Rounds = round
		counts, err := countsOf(rows, len(p.Keys))
		if err != nil {
			return nil, err
		}
		ok := false
		tk.Cut, tk.Bound, ok = prove(spec, sums, counted, counts)
		if ok {
			break
		}
		next = widen(spec, sums, counted, tk.Cut)
		if len(next) == 0 || round == MaxTopKRounds || tk.Candidates+len(next) > MaxTopKCandidates {
			what := fmt.Sprintf("count number %d of the %d candidates, by size,", spec.Limit, tk.Candidates)
			if spec.Threshold > 0 {
				what = "the threshold"
			}
			return nil, &Refused{Reason: fmt.Sprintf("the top-k summaries of rollup %s do not prove the answer exact: "+
				"an uncounted %s could count up to %d, and %s is %d (after %d round(s) of exact counts)",
				p.Rollup, spec.Item, tk.Bound, what, tk.Cut, tk.Rounds)}
		}
	}
	m := &merged{elemOIDs: make([]uint32, len(p.Keys)+len(p.Aggs)), cols: make([][][]byte, len(p.Keys)+len(p.Aggs))}
	for i := range p.Keys {
		m.elemOIDs[i] = fields[i].DataTypeOID
	}
	for j := range p.Aggs {
		m.elemOIDs[len(p.Keys)+j] = pgtype.Int8OID
	}
	row := make([][]byte, len(m.cols))
	for _, r := range rows {
		copy(row, r[:len(p.Keys)])
		for j := range p.Aggs {
			row[len(p.Keys)+j] = r[len(p.Keys)]
		}
		m.addRow(row)
	}
	return m, nil
}

// firstCandidates are the items the bounds cannot rule out: for a
// threshold T, those whose upper bound reaches T in some group; for the
// Limit largest counts, those whose upper bound reaches L, the Limit-th
// largest lower bound over all groups (all tracked items when fewer are).
func firstCandidates(spec *plan.TopKSpec, sums []summary) []candidate {
	cut := spec.Threshold
	if cut == 0 {
		var lowers []int64
		for _, s := range sums {
			for _, it := range s.items {
				lowers = append(lowers, it.Lower)
			}
		}
		if int64(len(lowers)) >= spec.Limit {
			slices.SortFunc(lowers, func(a, b int64) int { return cmp.Compare(b, a) })
			cut = lowers[spec.Limit-1]
		}
	}
	return itemsFrom(sums, map[string]bool{}, func(upper int64) bool { return upper >= cut })
}

// widen lists the uncounted items that could still change the answer
// given the cut the exact counts reached: those whose upper bound reaches
// it (passes it, when ties at the cut may be answered by any tied row).
// An untracked item cannot be listed: when one could change the answer,
// widen returns what it can and the proof fails again.
func widen(spec *plan.TopKSpec, sums []summary, counted map[string]bool, cut int64) []candidate {
	if spec.Threshold > 0 {
		return nil // the first round counted every tracked item that can reach it
	}
	return itemsFrom(sums, counted, func(upper int64) bool {
		return upper > cut || (spec.TotalOrder && upper == cut)
	})
}

// itemsFrom lists the tracked items, not in skip, whose upper bound in
// some group passes keep, each once.
func itemsFrom(sums []summary, skip map[string]bool, keep func(int64) bool) []candidate {
	seen := map[string]bool{}
	var out []candidate
	for _, s := range sums {
		for _, it := range s.items {
			c := candidate{item: it.Item, null: it.Null}
			k := c.key()
			if !keep(it.Upper) || skip[k] || seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, c)
		}
	}
	return out
}

// prove returns the cut (the threshold, or the Limit-th largest exact
// count, 0 when fewer were counted), the largest count an uncounted
// (group, item) pair can have, and whether the counted groups are then
// the answer's.
func prove(spec *plan.TopKSpec, sums []summary, counted map[string]bool, counts []int64) (cut, bound int64, ok bool) {
	for _, s := range sums {
		if s.f != nil {
			bound = max(bound, s.f.MaxError())
		}
		for _, it := range s.items {
			if !counted[candidate{item: it.Item, null: it.Null}.key()] {
				bound = max(bound, it.Upper)
			}
		}
	}
	if spec.Threshold > 0 {
		return spec.Threshold, bound, bound < spec.Threshold
	}
	if int64(len(counts)) < spec.Limit {
		// Every row the query has must have been counted.
		return 0, bound, bound == 0
	}
	slices.SortFunc(counts, func(a, b int64) int { return cmp.Compare(b, a) })
	cut = counts[spec.Limit-1]
	return cut, bound, bound < cut || (!spec.TotalOrder && bound == cut)
}

// countsOf reads the count column of the count statement's rows.
func countsOf(rows [][][]byte, col int) ([]int64, error) {
	out := make([]int64, 0, len(rows))
	for _, r := range rows {
		if len(r) <= col || len(r[col]) != 8 {
			return nil, fmt.Errorf("%w: a count row without its bigint count", ErrData)
		}
		out = append(out, int64(binary.BigEndian.Uint64(r[col])))
	}
	return out, nil
}

// countCandidates runs the plan's count statement for the candidates, in
// binary.
func (x *run) countCandidates(ctx context.Context, p *plan.TopK, cands []candidate) (*upstream.Result, error) {
	spec := p.Spec
	for _, n := range spec.CountParams {
		if n > p.Params {
			return nil, fmt.Errorf("exec: the count statement uses $%d of a plan of %d parameters", n, p.Params)
		}
	}
	st := statement(spec.CountSQL, p.Params, spec.CountParams, x.params, []int16{1})
	if len(st.ParamFormats) == 0 {
		st.ParamFormats = make([]int16, p.Params)
	}
	elem, arr := uint32(pgtype.Int8OID), uint32(pgtype.Int8ArrayOID)
	if spec.ArrayType == "text[]" {
		elem, arr = pgtype.TextOID, pgtype.TextArrayOID
	}
	var items [][]byte
	null := false
	for _, c := range cands {
		switch {
		case c.null:
			null = true
		case elem == pgtype.Int8OID && len(c.item) != 8:
			return nil, fmt.Errorf("%w: an integer item of %d bytes", ErrData, len(c.item))
		default:
			items = append(items, c.item)
		}
	}
	nullArg := []byte{0}
	if null {
		nullArg[0] = 1
	}
	st.ParamOIDs = append(st.ParamOIDs, arr, pgtype.BoolOID)
	st.Params = append(st.Params, appendBinaryArray(nil, elem, items), nullArg)
	st.ParamFormats = append(st.ParamFormats, 1, 1)
	res, err := x.q.Query(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("exec: top-k count: %w", err)
	}
	return res, nil
}

// approxGroups makes the groups of an approximate answer: every tracked
// item with its lower bound as its count, the item as text (the shape
// casts it to its type). It notes in tk the answered rows' bounds.
func approxGroups(p *plan.TopK, keyOIDs []uint32, sums []summary, tk *TopK) (*merged, error) {
	spec := p.Spec
	nk := len(p.Keys)
	m := &merged{elemOIDs: make([]uint32, nk+len(p.Aggs)), cols: make([][][]byte, nk+len(p.Aggs))}
	for i, j := 0, 0; i < nk; i++ {
		if i == spec.ItemKey {
			m.elemOIDs[i] = pgtype.TextOID
			continue
		}
		m.elemOIDs[i] = keyOIDs[j]
		j++
	}
	for j := range p.Aggs {
		m.elemOIDs[nk+j] = pgtype.Int8OID
	}
	type pair struct {
		it  sketch.FreqItem
		txt string
	}
	var all []pair
	row := make([][]byte, len(m.cols))
	for _, s := range sums {
		for _, it := range s.items {
			txt, err := itemText(spec.ItemForm, it)
			if err != nil {
				return nil, err
			}
			for i, j := 0, 0; i < nk; i++ {
				if i == spec.ItemKey {
					row[i] = nil
					if !it.Null {
						row[i] = []byte(txt)
					}
					continue
				}
				row[i] = s.keys[j]
				j++
			}
			for j := range p.Aggs {
				row[nk+j] = binary.BigEndian.AppendUint64(nil, uint64(it.Lower))
			}
			m.addRow(row)
			all = append(all, pair{it, txt})
		}
	}
	// The answered rows, as the shape orders them by the count.
	slices.SortStableFunc(all, func(a, b pair) int { return cmp.Compare(b.it.Lower, a.it.Lower) })
	n := len(all)
	if spec.Threshold > 0 {
		n, _ = slices.BinarySearchFunc(all, spec.Threshold, func(a pair, t int64) int {
			if a.it.Lower >= t {
				return -1
			}
			return 1
		})
		for _, a := range all[n:] {
			if a.it.Upper >= spec.Threshold {
				tk.Missing = append(tk.Missing, topkRow(spec, a.it, a.txt))
			}
		}
	} else {
		n = min(n, int(spec.Limit))
	}
	outside := tk.MaxError
	for _, a := range all[n:] {
		outside = max(outside, a.it.Upper)
	}
	for _, a := range all[:n] {
		r := topkRow(spec, a.it, a.txt)
		r.Uncertain = spec.Threshold == 0 && a.it.Lower <= outside
		if r.Uncertain {
			tk.Uncertain++
		}
		tk.Rows = append(tk.Rows, r)
	}
	return m, nil
}

// topkRow is an item's bounds, the item printed as SQL would.
func topkRow(spec *plan.TopKSpec, it sketch.FreqItem, txt string) TopKRow {
	r := TopKRow{Item: txt, Lower: it.Lower, Upper: it.Upper}
	if it.Null {
		r.Item = "NULL"
	} else if spec.ItemForm == "text" {
		r.Item = "'" + strings.ReplaceAll(txt, "'", "''") + "'"
	}
	return r
}

// itemText prints an item as its value's text.
func itemText(form string, it sketch.FreqItem) (string, error) {
	if it.Null || form == "text" {
		return string(it.Item), nil
	}
	if len(it.Item) != 8 {
		return "", fmt.Errorf("%w: an integer item of %d bytes", ErrData, len(it.Item))
	}
	return strconv.FormatInt(int64(binary.BigEndian.Uint64(it.Item)), 10), nil
}

// topkNotice is the NOTICE of a TopK answer.
func topkNotice(p *plan.TopK, t *TopK) string {
	spec := p.Spec
	var b strings.Builder
	if t.Mode == plan.TopKApprox {
		fmt.Fprintf(&b, "pgsketch: top-k of %s approximated from the frequent-items summaries of rollup %s: counts are lower bounds; %d summaries, %d items tracked, an untracked item counts at most %d",
			spec.Item, p.Rollup, t.Summaries, t.Tracked, t.MaxError)
		if len(t.Rows) > 0 {
			b.WriteString("; bounds of the answered rows")
			if spec.Threshold == 0 {
				b.WriteString(" (* place uncertain)")
			}
			b.WriteString(":")
			writeRows(&b, t.Rows)
		}
		if spec.Threshold > 0 && len(t.Missing) > 0 {
			fmt.Fprintf(&b, "; not answered but may reach %d:", spec.Threshold)
			writeRows(&b, t.Missing)
		}
		if spec.Threshold > 0 && t.MaxError >= spec.Threshold {
			fmt.Fprintf(&b, "; untracked items may reach %d too", spec.Threshold)
		}
		if spec.Threshold == 0 && int64(len(t.Rows)) < spec.Limit && t.MaxError > 0 {
			fmt.Fprintf(&b, "; only %d item(s) tracked, fewer than the %d asked for", len(t.Rows), spec.Limit)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "pgsketch: top-k of %s answered exactly: %d candidate(s) from the frequent-items summaries of rollup %s counted in %d round(s); ",
		spec.Item, t.Candidates, p.Rollup, t.Rounds)
	if spec.Threshold > 0 {
		fmt.Fprintf(&b, "no uncounted item reaches %d (at most %d)", spec.Threshold, t.Bound)
	} else {
		fmt.Fprintf(&b, "count number %d is %d, no uncounted item counts more than %d", spec.Limit, t.Cut, t.Bound)
	}
	return b.String()
}

// writeRows lists rows' bounds, at most maxNoticeRows of them.
func writeRows(b *strings.Builder, rows []TopKRow) {
	for i, r := range rows {
		if i == maxNoticeRows {
			fmt.Fprintf(b, " and %d more", len(rows)-i)
			return
		}
		mark := ""
		if r.Uncertain {
			mark = "*"
		}
		fmt.Fprintf(b, " %s%s %d..%d", r.Item, mark, r.Lower, r.Upper)
		if i < len(rows)-1 {
			b.WriteString(",")
		}
	}
}

// maxNoticeRows is the most rows whose bounds a NOTICE lists.
const maxNoticeRows = 20
