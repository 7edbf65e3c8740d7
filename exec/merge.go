package exec

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/sketch"
	"github.com/pgsketch/pgsketch/upstream"
)

// merge merges the rollup part and the fetch's other rows (base rows)
// per group: the rollup's rows, the base rows, the exact statement's rows,
// then one row per group with the estimates of its merged sketches.
func merge(p *plan.Rollup, part *rollupPart, fetch, exact *upstream.Result) (*merged, error) {
	mg := newMerger(p, fetch, exact)
	for i, oid := range mg.m.elemOIDs[:mg.nkeys] {
		if !groupable(oid) {
			return nil, fmt.Errorf("%w: group key %s is of type %d, whose equal values may differ in bytes", ErrData, p.Keys[i].Expr, oid)
		}
	}
	if err := mg.rollupRows(part); err != nil {
		return nil, err
	}
	if err := mg.baseRows(fetch); err != nil {
		return nil, err
	}
	if err := mg.exactRows(exact); err != nil {
		return nil, err
	}
	if err := mg.estimates(exact); err != nil {
		return nil, err
	}
	mg.m.groups = len(mg.order)
	return mg.m, nil
}

// merger holds a merge under way: the groups met so far, in order, and
// the rows (one value per key and aggregate) it adds to the merged columns.
type merger struct {
	p      *plan.Rollup
	nkeys  int
	m      *merged
	groups map[string]*group
	order  []*group
	kb     []byte
	row    [][]byte
}

func newMerger(p *plan.Rollup, fetch, exact *upstream.Result) *merger {
	nkeys := len(p.Keys)
	mg := &merger{p: p, nkeys: nkeys, groups: map[string]*group{}, row: make([][]byte, nkeys+len(p.Aggs)),
		m: &merged{elemOIDs: make([]uint32, nkeys+len(p.Aggs)), cols: make([][][]byte, nkeys+len(p.Aggs))}}
	for i := 0; i < nkeys; i++ {
		mg.m.elemOIDs[i] = fetch.Fields[1+i].DataTypeOID
	}
	for j, a := range p.Aggs {
		switch a.Op {
		case plan.MergeHLL, plan.MergeTheta, plan.MergeFreq:
			mg.m.elemOIDs[nkeys+j] = pgtype.Int8OID
			if a.Sketch {
				mg.m.elemOIDs[nkeys+j] = pgtype.ByteaOID
			}
		case plan.Exact:
			mg.m.elemOIDs[nkeys+j] = exact.Fields[a.ExactColumn].DataTypeOID
		default:
			mg.m.elemOIDs[nkeys+j] = fetch.Fields[a.RollupColumn].DataTypeOID
		}
	}
	if nkeys == 0 {
		mg.lookup(nil) // one group, even for no rows
	}
	return mg
}

// lookup returns the group of those key values, made on first use.
func (mg *merger) lookup(keys [][]byte) *group {
	mg.kb = groupKey(mg.kb[:0], mg.m.elemOIDs[:mg.nkeys], keys)
	g := mg.groups[string(mg.kb)]
	if g == nil {
		g = &group{keys: keys, sketches: make([]*sketch.HLL, len(mg.p.Aggs)), only: make([]*partRow, len(mg.p.Aggs)),
			thetas: make([]thetaMerge, len(mg.p.Aggs)), freqs: make([]*sketch.Freq, len(mg.p.Aggs))}
		mg.groups[string(mg.kb)] = g
		mg.order = append(mg.order, g)
	}
	return g
}

// startRow clears the row and sets its keys.
func (mg *merger) startRow(keys [][]byte) {
	clear(mg.row)
	copy(mg.row, keys)
}

// rollupRows merges the rollup half's rows: sketches into their group's,
// the other aggregates' values into the merged columns.
func (mg *merger) rollupRows(part *rollupPart) error {
	for i := range part.rows {
		pr := &part.rows[i]
		g := mg.lookup(pr.keys)
		mg.startRow(pr.keys)
		for j, a := range mg.p.Aggs {
			switch a.Op {
			case plan.MergeHLL:
				if pr.hll[j] != nil && g.sketches[j] == nil && g.only[j] == nil {
					g.only[j] = pr
					continue
				}
				if err := g.materialize(j, a); err != nil {
					return err
				}
				if err := g.newSketch(j, a); err != nil {
					return err
				}
				if pr.hll[j] != nil {
					if err := unionFolding(&g.sketches[j], pr.hll[j]); err != nil {
						return fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
					}
				}
			case plan.MergeTheta:
				if pr.theta != nil && pr.theta[j] != nil {
					g.thetas[j].parts = append(g.thetas[j].parts, pr.theta[j])
				}
			case plan.MergeFreq:
				if pr.freq != nil && pr.freq[j] != nil {
					if err := g.mergeFreq(j, a, pr.freq[j]); err != nil {
						return err
					}
				}
			case plan.Exact:
			default:
				mg.row[mg.nkeys+j] = pr.vals[j]
			}
		}
		mg.m.addRow(mg.row)
	}
	return nil
}

// baseRows merges the base rows: each distinct value of a sketched
// expression hashed into its group's sketch, the other aggregates' values
// into the merged columns.
func (mg *merger) baseRows(fetch *upstream.Result) error {
	nkeys := mg.nkeys
	for _, r := range fetch.Rows {
		if len(r) != len(fetch.Fields) {
			return fmt.Errorf("%w: fetch row of %d columns", ErrData, len(r))
		}
		if string(r[0]) == "rollup" {
			return fmt.Errorf("%w: rollup row among the base rows", ErrData)
		}
		if string(r[0]) == plan.InsertedPart {
			mg.m.insertedRows = true
		} else {
			mg.m.baseRows = true
		}
		g := mg.lookup(r[1 : 1+nkeys])
		mg.startRow(r[1 : 1+nkeys])
		for j, a := range mg.p.Aggs {
			switch a.Op {
			case plan.MergeHLL:
				if err := g.materialize(j, a); err != nil {
					return err
				}
				if err := g.newSketch(j, a); err != nil {
					return err
				}
				if err := eachTextArrayElement(r[a.BaseColumn], g.sketches[j].Add); err != nil {
					return fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
				}
			case plan.MergeTheta:
				var addErr error
				err := eachTextArrayElement(r[a.BaseColumn], func(v []byte) {
					if addErr == nil {
						addErr = g.thetas[j].addValue(a, v)
					}
				})
				if err = cmp.Or(err, addErr); err != nil {
					return fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
				}
			case plan.MergeFreq:
				if err := g.addItems(j, a, r[a.BaseColumn], r[a.BaseColumn+1]); err != nil {
					return fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
				}
			case plan.Exact:
			default:
				mg.row[nkeys+j] = r[a.BaseColumn]
			}
		}
		mg.m.addRow(mg.row)
	}
	return nil
}

// exactRows adds the exact statement's rows, if any.
func (mg *merger) exactRows(exact *upstream.Result) error {
	if exact == nil {
		return nil
	}
	for _, r := range exact.Rows {
		if len(r) != len(exact.Fields) {
			return fmt.Errorf("%w: exact row of %d columns", ErrData, len(r))
		}
		mg.startRow(r[:mg.nkeys])
		for j, a := range mg.p.Aggs {
			if a.Op == plan.Exact {
				mg.row[mg.nkeys+j] = r[a.ExactColumn]
			}
		}
		mg.m.addRow(mg.row)
	}
	return nil
}

// estimates adds one row per group with the estimates of its sketches,
// and a sample (for the status page) where the exact count of the same
// expression is in the answer too.
func (mg *merger) estimates(exact *upstream.Result) error {
	p := mg.p
	exactOf, exactVals := exactBeside(p, mg.m.elemOIDs[:mg.nkeys], exact)
	for _, g := range mg.order {
		mg.startRow(g.keys)
		for j, a := range p.Aggs {
			if a.Op == plan.MergeTheta {
				u, err := g.thetas[j].result(a)
				if err != nil {
					return err
				}
				g.thetas[j].parts, g.thetas[j].upd = []*sketch.CompactTheta{u}, nil
				mg.row[mg.nkeys+j] = binary.BigEndian.AppendUint64(nil, uint64(math.Round(u.Estimate())))
				continue
			}
			if a.Op != plan.MergeHLL {
				continue
			}
			if a.Sketch {
				b, err := g.sketchBytes(j)
				if err != nil {
					return fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
				}
				mg.row[mg.nkeys+j] = b
				continue
			}
			est := int64(0)
			if h, pr := g.sketches[j], g.only[j]; h != nil || pr != nil {
				var e float64
				if pr != nil {
					var err error
					if e, err = pr.estimate(j, a); err != nil {
						return err
					}
				} else {
					e = h.Estimate()
				}
				if math.IsNaN(e) {
					return fmt.Errorf("%w: %s: undefined sketch", ErrData, a.Measure)
				}
				est = int64(math.Round(e))
				if k, ok := exactOf[j]; ok {
					if vals := exactVals[string(groupKey(nil, mg.m.elemOIDs[:mg.nkeys], g.keys))]; vals != nil && vals[k] > 0 {
						mg.m.samples = append(mg.m.samples, Sample{Exact: float64(vals[k]), Estimate: e,
							StdErr: 1.04 / math.Sqrt(float64(uint64(1)<<a.Log2m))})
					}
				}
			}
			mg.row[mg.nkeys+j] = binary.BigEndian.AppendUint64(nil, uint64(est))
		}
		mg.m.addRow(mg.row)
	}
	return nil
}

// exactBeside pairs each estimated aggregate with an exact count of the
// same base expression in the answer (exactOf: estimate's index -> exact
// one's), and reads the exact counts per group key.
func exactBeside(p *plan.Rollup, keyOIDs []uint32, exact *upstream.Result) (exactOf map[int]int, exactVals map[string][]int64) {
	exactOf = map[int]int{}
	for j, a := range p.Aggs {
		for k, b := range p.Aggs {
			if a.Op == plan.MergeHLL && b.Op == plan.Exact && a.Base != "" && a.Base == b.Base {
				exactOf[j] = k
			}
		}
	}
	exactVals = map[string][]int64{}
	if exact == nil || len(exactOf) == 0 {
		return exactOf, exactVals
	}
	for _, r := range exact.Rows {
		vals := make([]int64, len(p.Aggs))
		for k, b := range p.Aggs {
			if b.Op == plan.Exact && b.ExactColumn >= 0 && b.ExactColumn < len(r) && len(r[b.ExactColumn]) == 8 {
				vals[k] = int64(binary.BigEndian.Uint64(r[b.ExactColumn]))
			}
		}
		exactVals[string(groupKey(nil, keyOIDs, r[:len(p.Keys)]))] = vals
	}
	return exactOf, exactVals
}

// sketchBytes is agg j's merged sketch in postgresql-hll's storage
// format, or nil when the group has none.
func (g *group) sketchBytes(j int) ([]byte, error) {
	switch h, pr := g.sketches[j], g.only[j]; {
	case h != nil:
		return h.AppendBinary(nil)
	case pr != nil:
		return pr.hll[j].AppendBinary(nil)
	}
	return nil, nil
}
