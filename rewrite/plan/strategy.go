package plan

import "strings"

// Merge is where the sketches of a plan's rollup half are merged.
type Merge string

const (
	// MergeProxy fetches every rollup row's sketches (array_agg per group)
	// and merges them in the proxy: FetchSQL.
	MergeProxy Merge = "proxy"
	// MergeServer has PostgreSQL merge them per group with the hll
	// extension's hll_union_agg, so that one sketch per group crosses the
	// wire: ServerFetchSQL. The proxy still estimates from the merged bytes
	// and adds the base rows' hashes.
	MergeServer Merge = "server"
	// MergeAuto chooses by the rewriter's rule (package rewrite, chooseMerge).
	MergeAuto Merge = "auto"
)

// ParseMerge reads a pgsketch.merge setting; "" is MergeAuto.
func ParseMerge(s string) (Merge, bool) {
	switch v := Merge(strings.ToLower(strings.TrimSpace(s))); v {
	case "", MergeAuto:
		return MergeAuto, true
	case MergeProxy, MergeServer:
		return v, true
	}
	return "", false
}
