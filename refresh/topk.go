package refresh

import (
	"encoding/binary"
	"fmt"

	"github.com/pgsketch/pgsketch/sketch"
)

// topkState is a group's frequent-items summary of one measure while it is
// rebuilt. A summary holds up to twice its size of counters between
// reductions and counts exactly until then, so for a group with at most
// twice the measure's size of distinct items the bytes depend only on the
// rows, not on their order or the number of streams; for busier ones the
// bounds hold whatever the order, but the bytes may differ between
// rebuilds. (Counting a busy group exactly would hold every distinct item
// of every group of the refresh in memory at once.)
type topkState struct {
	f *sketch.Freq
}

// newTopkState is the state of a measure of 2^log2 counters.
func newTopkState(log2 int) *topkState {
	f, _ := sketch.NewFreq(1 << log2) // log2 checked by parseFields
	return &topkState{f: f}
}

// add counts one base row's value in the given form (nil: a NULL, an item
// of its own), or merges a serialized summary (form "sketch": a level's
// rollup rows). Integers are items as 8 big-endian bytes of their int64
// value, whatever their width; strings their bytes.
func (t *topkState) add(form string, v []byte) error {
	if form == "sketch" {
		if v == nil {
			return nil
		}
		var o sketch.Freq
		if err := o.UnmarshalBinary(v); err != nil {
			return err
		}
		return t.f.Merge(&o)
	}
	if v == nil {
		return t.f.AddNull(1)
	}
	var n int64
	switch form {
	case "text":
		return t.f.Add(v, 1)
	case "int2":
		if len(v) != 2 {
			return fmt.Errorf("int2 of %d bytes", len(v))
		}
		n = int64(int16(binary.BigEndian.Uint16(v)))
	case "int4":
		if len(v) != 4 {
			return fmt.Errorf("int4 of %d bytes", len(v))
		}
		n = int64(int32(binary.BigEndian.Uint32(v)))
	case "int8":
		if len(v) != 8 {
			return fmt.Errorf("int8 of %d bytes", len(v))
		}
		n = int64(binary.BigEndian.Uint64(v))
	default:
		return fmt.Errorf("unknown value form %q", form)
	}
	var item [8]byte
	binary.BigEndian.PutUint64(item[:], uint64(n))
	return t.f.Add(item[:], 1)
}

// absorb merges o (another stream's state of the same group).
func (t *topkState) absorb(o *topkState) error { return t.f.Merge(o.f) }

// marshal returns the summary in its serialized form.
func (t *topkState) marshal() ([]byte, error) { return t.f.MarshalBinary() }
