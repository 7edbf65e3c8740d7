package sketch

import (
	"encoding/binary"
	"fmt"
)

func le64(b []byte) uint64       { return binary.LittleEndian.Uint64(b) }
func putLE64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }
func be64(b []byte) uint64       { return binary.BigEndian.Uint64(b) }
func putBE64(b []byte, v uint64) { binary.BigEndian.PutUint64(b, v) }

// decodeInto is the UnmarshalBinary of a format with a decoder of its own:
// it decodes data and replaces *dst with the result only if that succeeds,
// so that on error the receiver is unchanged.
func decodeInto[T any](dst *T, format string, decode func([]byte) (*T, error), data []byte) error {
	d, err := decode(data)
	if err != nil {
		return fmt.Errorf("sketch: unmarshal %s: %w", format, err)
	}
	*dst = *d
	return nil
}
