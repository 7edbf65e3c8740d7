package rewrite

import (
	"fmt"
	"sync"
	"time"
	_ "time/tzdata" // the zones' rules, where the system has none

	"github.com/pgsketch/pgsketch/catalog"
)

// PostgreSQL cuts a timestamptz into buckets with date_trunc(unit, t,
// zone): the wall-clock time in zone, truncated, read back as an instant
// (for hours and less at t's own offset). Some clock changes make those
// buckets misbehave in ways the fetch and the rewriter do not follow:
//
//   - an hour bucket whose start reads as another wall-clock hour or day
//     than its rows, where the clocks move by other than whole hours or
//     at other than a whole hour (Lord Howe Island's half-hour changes,
//     the Chatham Islands' at 2:45, Kathmandu's quarter hour in 1986): a
//     key or filter evaluated on the bucket's start is not its rows';
//   - a day whose first rows precede the last rows of the day before,
//     where the clocks went back across midnight (St. John's at 00:01
//     until 2011): buckets out of order in time.
//
// zoneFaults finds such changes in a zone's rules from 1970 on, with Go's
// copy of the tz database (which PostgreSQL's shares).

// zoneFault says why grain g's buckets in zone misbehave, or "".
func zoneFault(zone string, g catalog.Grain) string {
	if fixedZone(zone) {
		return ""
	}
	f := zoneFaults(zone)
	switch {
	case f.unknown:
		return "time zone " + zone + " is unknown to pgsketch's time zone rules"
	case g == catalog.Hour && f.hour != "":
		return f.hour
	case g != catalog.Hour && f.day != "":
		return f.day
	}
	return ""
}

type faults struct {
	unknown   bool
	hour, day string
	// utc says when the zone's hours stopped being UTC hours: an offset
	// from UTC other than whole hours, or a change at other than a whole
	// UTC hour.
	utc string
}

var zoneFaultCache sync.Map // zone name → faults

func zoneFaults(zone string) faults {
	if f, ok := zoneFaultCache.Load(zone); ok {
		return f.(faults)
	}
	f := scanZone(zone)
	zoneFaultCache.Store(zone, f)
	return f
}

// scanZone checks every change of zone's offset from 1970 to 2100.
func scanZone(zone string) faults {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return faults{unknown: true}
	}
	var f faults
	t := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	end := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	_, off := t.In(loc).Zone()
	if off%3600 != 0 {
		f.utc = offsetFault(zone, off, t)
	}
	for t.Before(end) && (f.hour == "" || f.day == "" || f.utc == "") {
		next := t.Add(time.Hour)
		_, noff := next.In(loc).Zone()
		if noff != off {
			hi := changeSecond(loc, t, next, off)
			at := time.Unix(hi, 0).UTC()
			before, after := hi+int64(off), hi+int64(noff) // wall-clock seconds
			if f.hour == "" && ((noff-off)%3600 != 0 || before%3600 != 0) {
				f.hour = fmt.Sprintf("time zone %s changed its clocks at %s by other than whole hours or at other than a whole hour, where hour buckets hold rows of two wall-clock hours", zone, at.Format(time.RFC3339))
			}
			if f.day == "" && floorDiv(after, 86400) < floorDiv(before-1, 86400) {
				f.day = fmt.Sprintf("time zone %s turned its clocks back across midnight at %s, where a day's first rows precede the last rows of the day before", zone, at.Format(time.RFC3339))
			}
			if f.utc == "" && (noff%3600 != 0 || hi%3600 != 0) {
				f.utc = offsetFault(zone, noff, at)
			}
			off = noff
		}
		t = next
	}
	return f
}

// changeSecond is the first second of (t, next] at which loc's offset
// from UTC is no longer off.
func changeSecond(loc *time.Location, t, next time.Time, off int) int64 {
	lo, hi := t.Unix(), next.Unix()
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if _, o := time.Unix(mid, 0).In(loc).Zone(); o == off {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

func offsetFault(zone string, off int, at time.Time) string {
	return fmt.Sprintf("time zone %s is %s from UTC from %s on, where its hours are not UTC hours", zone, (time.Duration(off) * time.Second).String(), at.Format(time.RFC3339))
}

// utcHours reports why zone's wall-clock hours are not UTC hours from 1970
// to 2100, or "": where they are, every unit of an hour or longer cut in
// zone holds whole hours of UTC (and of any other such zone).
func utcHours(zone string) string {
	if fixedZone(zone) { // UTC, or Etc/GMT±N: whole hours
		return ""
	}
	f := zoneFaults(zone)
	if f.unknown {
		return "time zone " + zone + " is unknown to pgsketch's time zone rules"
	}
	return f.utc
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
