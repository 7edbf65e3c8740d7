package exec

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/sketch"
)

// mergeFreqs merges the frequent-items summaries of a fetch's rollup-half
// column for agg a (a bytea[] in binary format, one summary per rollup
// row). NULL elements are skipped; nil is returned when there is none.
func mergeFreqs(arr []byte, a plan.Agg) (*sketch.Freq, error) {
	var merged *sketch.Freq
	err := eachSketch(arr, a, func(f *sketch.Freq) error {
		if merged == nil {
			var err error
			if merged, err = sketch.NewFreq(1 << a.Log2m); err != nil {
				return err
			}
		}
		return merged.Merge(f)
	})
	if err != nil {
		return nil, err
	}
	return merged, nil
}

// freq returns group g's summary j of agg a, made empty on first use.
func (g *group) freq(j int, a plan.Agg) (*sketch.Freq, error) {
	if g.freqs[j] == nil {
		f, err := sketch.NewFreq(1 << a.Log2m)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
		}
		g.freqs[j] = f
	}
	return g.freqs[j], nil
}

// mergeFreq merges a rollup row's summary into group g's.
func (g *group) mergeFreq(j int, a plan.Agg, o *sketch.Freq) error {
	f, err := g.freq(j, a)
	if err != nil {
		return err
	}
	if err := f.Merge(o); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
	}
	return nil
}

// addItems counts a base row's values (a text array of the non-NULL
// values, duplicates kept) and its NULL count (bigint, binary) into group
// g's summary j, each value as the refresher makes it an item.
func (g *group) addItems(j int, a plan.Agg, values, nulls []byte) error {
	f, err := g.freq(j, a)
	if err != nil {
		return err
	}
	var addErr error
	err = eachTextArrayElement(values, func(v []byte) {
		if addErr != nil {
			return
		}
		item, err := freqItem(a.ValueForm, v)
		if err != nil {
			addErr = err
			return
		}
		addErr = f.Add(item, 1)
	})
	if err != nil || addErr != nil {
		return cmp.Or(err, addErr)
	}
	if len(nulls) == 8 {
		if n := int64(binary.BigEndian.Uint64(nulls)); n > 0 {
			return f.AddNull(n)
		}
	} else if nulls != nil {
		return fmt.Errorf("NULL count of %d bytes", len(nulls))
	}
	return nil
}

// freqItem is a value, given as its text, as the item the refresher
// counts it as: an integer's int64 in 8 big-endian bytes, a string's
// bytes (plan.Agg.ValueForm).
func freqItem(form string, text []byte) ([]byte, error) {
	bits := map[string]int{"int2": 16, "int4": 32, "int8": 64}[form]
	switch {
	case form == "text":
		return text, nil
	case bits > 0:
		n, err := strconv.ParseInt(string(text), 10, bits)
		if err != nil {
			return nil, fmt.Errorf("%s value %q: %w", form, text, err)
		}
		return binary.BigEndian.AppendUint64(nil, uint64(n)), nil
	}
	return nil, fmt.Errorf("unknown value form %q", form)
}
