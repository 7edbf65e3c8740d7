package plan

import (
	"slices"
	"strconv"
	"strings"
)

// Session is what the rewriter needs of the client's session settings.
type Session struct {
	// SearchPath is the search_path setting as SHOW prints it, e.g.
	// `"$user", public`. Empty means the default.
	SearchPath string
	// User is the session user, for "$user" in SearchPath.
	User string
	// TimeZone is the TimeZone setting.
	TimeZone string
	// DateStyle is the DateStyle setting ("" is PostgreSQL's default,
	// ISO, MDY).
	DateStyle string
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
	// Abbreviations is the timezone_abbreviations setting ("" is the
	// Default set): a zone argument may be one of its abbreviations.
	Abbreviations string
	// Zones are the values bound to the statement's parameters that name
	// a time zone (timezone($n, x), x AT TIME ZONE $n, date_trunc's zone
	// argument), as ZoneValues encodes them: the rewriter reads such a $n
	// as that literal, so a plan made with them holds for those values
	// only. Empty for the simple protocol and for statements that have no
	// such parameter.
	Zones string
}

// ZoneValues encodes values[n] for each parameter number n, in order, for
// Session.Zones. A value holding NUL (which no text value of PostgreSQL
// does) makes the encoding ambiguous: ok is false.
func ZoneValues(values map[int]string) (zones string, ok bool) {
	ns := make([]int, 0, len(values))
	for n := range values {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	var b strings.Builder
	for _, n := range ns {
		if strings.IndexByte(values[n], 0) >= 0 {
			return "", false
		}
		b.WriteString(strconv.Itoa(n))
		b.WriteByte(0)
		b.WriteString(values[n])
		b.WriteByte(0)
	}
	return b.String(), true
}

// Zone is the value Zones holds for $n.
func (s Session) Zone(n int) (string, bool) {
	rest := s.Zones
	for rest != "" {
		num, after, ok1 := strings.Cut(rest, "\x00")
		val, next, ok2 := strings.Cut(after, "\x00")
		if !ok1 || !ok2 {
			return "", false
		}
		if num == strconv.Itoa(n) {
			return val, true
		}
		rest = next
	}
	return "", false
}
