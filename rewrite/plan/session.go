package plan

// Session is what the rewriter needs of the client's session settings.
type Session struct {
	// SearchPath is the search_path setting as SHOW prints it, e.g.
	// `"$user", public`. Empty means the default.
	SearchPath string
	// User is the session user, for "$user" in SearchPath.
	User string
	// TimeZone is the TimeZone setting.
	TimeZone string
	// Approx is pgsketch.approx: when on, COUNT(DISTINCT ...) is answered
	// from rollups too; when off only APPROX_COUNT_DISTINCT(...) is.
	Approx bool
	// Merge is pgsketch.merge: where the rollup's sketches are merged
	// ("" is MergeAuto).
	Merge Merge
	// MaxOverlapError is pgsketch.max_overlap_error as a fraction: an
	// Overlap answer whose relative error would be larger is refused, and
	// the query runs exactly (0 is the executor's default).
	MaxOverlapError float64
	// TopK is pgsketch.topk: TopKVerified (or ""), TopKApprox or TopKOff.
	TopK string
}
