package sketch

import "errors"

// Sentinel errors. Every error returned by this package wraps one of them, so
// callers can test with errors.Is.
var (
	// ErrInvalidParams reports a log2m, regwidth or explicit cutoff outside
	// the supported range, in a constructor argument or in a sketch header.
	ErrInvalidParams = errors.New("invalid sketch parameters")

	// ErrIncompatible reports an operation on two sketches whose parameters
	// (log2m, regwidth, explicit cutoff, sparse flag) differ.
	ErrIncompatible = errors.New("incompatible sketches")

	// ErrTruncated reports serialized bytes that end before the header or
	// the data the header announces is complete.
	ErrTruncated = errors.New("truncated sketch")

	// ErrVersion reports a schema version other than 1 in the first byte.
	ErrVersion = errors.New("unsupported sketch schema version")

	// ErrType reports a type nibble that names no known representation.
	ErrType = errors.New("unknown sketch type")

	// ErrCorrupt reports bytes that are complete but not a valid encoding:
	// trailing bytes, unsorted or duplicate EXPLICIT values, SPARSE indices
	// not ascending, zero-valued SPARSE registers, non-zero padding bits.
	ErrCorrupt = errors.New("corrupt sketch")

	// ErrOverflow reports a count that would take a total past
	// math.MaxInt64: in an Add, or in a Merge of two large summaries.
	ErrOverflow = errors.New("sketch count overflow")
)
