package sketch

import "encoding/binary"

func le64(b []byte) uint64       { return binary.LittleEndian.Uint64(b) }
func putLE64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }
func be64(b []byte) uint64       { return binary.BigEndian.Uint64(b) }
func putBE64(b []byte, v uint64) { binary.BigEndian.PutUint64(b, v) }
