package refresh

import (
	"fmt"

	"github.com/pgsketch/pgsketch/sketch"
)

// thetaState is a group's Theta sketch of one measure while it is rebuilt:
// an update sketch of the base rows' values, and the sketches to unite with
// it (a level's rollup rows, another stream's sketch of the same group).
type thetaState struct {
	lgK   int
	upd   *sketch.Theta
	parts []*sketch.CompactTheta
}

// foldAt is how many sketches a thetaState collects before uniting them
// into one, which bounds its memory when a level unites many rollup rows.
const foldAt = 64

func newThetaState(lgK int) *thetaState {
	upd, _ := sketch.NewTheta(lgK) // lgK checked by parseFields
	return &thetaState{lgK: lgK, upd: upd}
}

// add adds one value in the given form. The bytes hashed are those
// datasketches-postgresql's theta_sketch_build hashes for the column's type:
// an integer's 2, 4 or 8 bytes in little-endian order (the first bytes of
// its Datum), a string's bytes. COPY BINARY sends integers big-endian.
func (t *thetaState) add(form string, v []byte) error {
	var le [8]byte
	switch form {
	case "text":
		// By its hash: AddBytes skips an empty string (as the DataSketches
		// libraries' update of a string does), theta_sketch_build hashes it,
		// and '' is a value INTERSECT and EXCEPT count.
		t.upd.AddHash(sketch.ThetaHash(v))
		return nil
	case "sketch":
		return t.unite(v)
	case "int2", "int4", "int8":
		n := map[string]int{"int2": 2, "int4": 4, "int8": 8}[form]
		if len(v) != n {
			return fmt.Errorf("%s of %d bytes", form, len(v))
		}
		for i := range n {
			le[i] = v[n-1-i]
		}
		t.upd.AddBytes(le[:n])
		return nil
	}
	return fmt.Errorf("unknown value form %q", form)
}

// unite adds a serialized compact sketch to those to unite.
func (t *thetaState) unite(b []byte) error {
	var c sketch.CompactTheta
	if err := c.UnmarshalBinary(b); err != nil {
		return err
	}
	t.parts = append(t.parts, &c)
	return t.fold()
}

// fold unites the sketches collected into one once there are foldAt.
func (t *thetaState) fold() error {
	if len(t.parts) < foldAt {
		return nil
	}
	u, err := sketch.ThetaUnion(t.lgK, t.parts...)
	if err != nil {
		return err
	}
	t.parts = append(t.parts[:0], u)
	return nil
}

// absorb takes o's values and sketches (o is another stream's state of the
// same group).
func (t *thetaState) absorb(o *thetaState) error {
	t.parts = append(t.parts, o.parts...)
	t.parts = append(t.parts, o.upd.Compact())
	return t.fold()
}

// marshal returns the group's sketch in the compact serialization: the
// union of everything it holds, trimmed to the k smallest hashes as a
// union's result is. That form depends only on the set of values, not on
// the order rows arrived in (an update sketch's retained hashes do) nor on
// how many streams read them, so a rebuilt bucket has the same bytes
// however it was read.
func (t *thetaState) marshal() ([]byte, error) {
	c, err := sketch.ThetaUnion(t.lgK, append(t.parts, t.upd.Compact())...)
	if err != nil {
		return nil, err
	}
	return c.MarshalBinary()
}
