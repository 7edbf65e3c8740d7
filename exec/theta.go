package exec

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/sketch"
)

// thetaMerge is a group's Theta sketch while it is merged: the rollup rows'
// sketches and an update sketch of the base rows' values.
type thetaMerge struct {
	parts []*sketch.CompactTheta
	upd   *sketch.Theta
}

// mergeThetas unites the Theta sketches of a fetch's rollup-half column
// for agg a (a bytea[] in binary format, one sketch per rollup row). NULL
// elements are skipped; nil is returned when there is no sketch.
func mergeThetas(arr []byte, a plan.Agg) (*sketch.CompactTheta, error) {
	var parts []*sketch.CompactTheta
	err := eachSketch(arr, a, func(c *sketch.CompactTheta) error {
		parts = append(parts, c)
		return nil
	})
	if err != nil || len(parts) == 0 {
		return nil, err
	}
	u, err := sketch.ThetaUnion(a.Log2m, parts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
	}
	return u, nil
}

// addValue hashes one base row's value, given as its text, as the
// refresher hashed the column's values (plan.Agg.ValueForm).
func (t *thetaMerge) addValue(a plan.Agg, text []byte) error {
	if t.upd == nil {
		upd, err := sketch.NewTheta(a.Log2m)
		if err != nil {
			return err
		}
		t.upd = upd
	}
	width := map[string]int{"int2": 2, "int4": 4, "int8": 8}[a.ValueForm]
	switch {
	case a.ValueForm == "text":
		t.upd.AddHash(sketch.ThetaHash(text)) // '' too, as the refresher hashes it
	case width > 0:
		n, err := strconv.ParseInt(string(text), 10, 8*width)
		if err != nil {
			return fmt.Errorf("%s value %q: %w", a.ValueForm, text, err)
		}
		le := binary.LittleEndian.AppendUint64(nil, uint64(n))
		t.upd.AddBytes(le[:width])
	default:
		return fmt.Errorf("unknown value form %q", a.ValueForm)
	}
	return nil
}

// result is the merged sketch: the union of the rollup rows' and the base
// rows', trimmed to the k smallest hashes.
func (t *thetaMerge) result(a plan.Agg) (*sketch.CompactTheta, error) {
	parts := t.parts
	if t.upd != nil {
		parts = append(parts, t.upd.Compact())
	}
	u, err := sketch.ThetaUnion(a.Log2m, parts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
	}
	return u, nil
}
