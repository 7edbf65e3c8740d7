package catalog

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Query returns the whole catalog as one JSON value (function
// pgsketch.catalog, installed by the migrations); Parse reads it.
const Query = "SELECT pgsketch.catalog()"

type jsonRollup struct {
	Name         string   `json:"name"`
	SourceSchema string   `json:"source_schema"`
	SourceTable  string   `json:"source_table"`
	RollupSchema string   `json:"rollup_schema"`
	RollupTable  string   `json:"rollup_table"`
	SourceOID    uint32   `json:"source_oid"`
	SourceRLS    bool     `json:"source_rls"`
	SourceCols   []string `json:"source_columns"`
	NotNull      []string `json:"not_null_columns"`
	TimeColumn   string   `json:"time_column"`
	TimeType     string   `json:"time_type"`
	Grain        string   `json:"grain"`
	TimeZone     string   `json:"time_zone"`
	Dimensions   []struct {
		Column string `json:"column"`
		Type   string `json:"type"`
	} `json:"dimensions"`
	Measures []struct {
		Column     string `json:"column"`
		Kind       string `json:"kind"`
		Expression string `json:"expression"`
		Type       string `json:"type"`
		Log2m      int    `json:"log2m"`
		Regwidth   int    `json:"regwidth"`
		Hash       string `json:"hash"`
	} `json:"measures"`
	Watermark      string             `json:"watermark"`
	LateSeconds    float64            `json:"late_window_seconds"`
	Version        int64              `json:"version"`
	Rows           int64              `json:"rows"`
	DistinctValues map[string]float64 `json:"distinct_values"`
	// Capture is null when change capture is in place, else why not;
	// absent from catalogs older than change capture.
	Capture json.RawMessage `json:"capture"`
	Levels  []struct {
		Grain  string `json:"grain"`
		Schema string `json:"schema"`
		Table  string `json:"table"`
	} `json:"levels"`
	// InsertsTable is absent from catalogs older than inserted rows, and
	// null until the rollup's first refresh under one that has them.
	InsertsTable *string `json:"inserts_table"`
	// ShardLog is absent from catalogs older than capture on distributed
	// sources, and null for a rollup whose source Citus does not
	// distribute.
	ShardLog *string `json:"shard_log"`
	// LoggedCheck is absent from catalogs older than
	// capture_check_logged.
	LoggedCheck bool `json:"logged_check"`
	// CaptureInPlace is absent from catalogs older than the view
	// capture_in_place, and false where Citus is installed.
	CaptureInPlace bool `json:"capture_in_place"`
	// FirstSeen is absent from catalogs older than first-seen
	// bookkeeping, and null for a rollup without it.
	FirstSeen *struct {
		Key   string `json:"key"`
		Built bool   `json:"built"`
	} `json:"first_seen"`
}

// Parse reads the JSON that Query returns. A rollup whose source table or
// columns have disappeared is kept, with empty types, so that the rewriter
// can say why it does not use it.
func Parse(b []byte) (*Snapshot, error) {
	var in []jsonRollup
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	out := make([]*Rollup, 0, len(in))
	for _, j := range in {
		r := &Rollup{
			Name:          j.Name,
			Source:        Table{Schema: j.SourceSchema, Name: j.SourceTable},
			Table:         Table{Schema: j.RollupSchema, Name: j.RollupTable},
			SourceOID:     j.SourceOID,
			SourceRLS:     j.SourceRLS,
			SourceColumns: j.SourceCols,
			NotNull:       j.NotNull,
			TimeColumn:    j.TimeColumn,
			TimeType:      TimeType(j.TimeType),
			TimeZone:      j.TimeZone,
			LateWindow:    time.Duration(j.LateSeconds * float64(time.Second)),
			Version:       j.Version,
			Rows:          j.Rows,
		}
		if j.InsertsTable != nil && *j.InsertsTable != "" {
			r.Inserts = &Table{Schema: "pgsketch", Name: *j.InsertsTable}
		}
		r.Distributed = j.ShardLog != nil && *j.ShardLog != ""
		r.LoggedCheck = j.LoggedCheck
		r.CaptureInPlace = j.CaptureInPlace
		if j.FirstSeen != nil && j.FirstSeen.Key != "" {
			r.FirstSeen = &FirstSeen{Key: j.FirstSeen.Key, Built: j.FirstSeen.Built}
		}
		switch {
		case len(j.Capture) == 0:
			r.CaptureBroken = NoCapture
		case string(j.Capture) != "null":
			if err := json.Unmarshal(j.Capture, &r.CaptureBroken); err != nil || r.CaptureBroken == "" {
				r.CaptureBroken = "its change capture is not in place"
			}
		}
		g, err := ParseGrain(j.Grain)
		if err != nil {
			return nil, fmt.Errorf("catalog: rollup %s: %w", j.Name, err)
		}
		r.Grain = g
		if j.Watermark != "" {
			wm, err := time.Parse("2006-01-02T15:04:05.999999Z", j.Watermark)
			if err != nil {
				return nil, fmt.Errorf("catalog: rollup %s: watermark: %w", j.Name, err)
			}
			r.Watermark = wm
		}
		for _, d := range j.Dimensions {
			r.Dimensions = append(r.Dimensions, Dimension{Column: d.Column, Type: d.Type, DistinctValues: j.DistinctValues[d.Column]})
		}
		for _, m := range j.Measures {
			r.Measures = append(r.Measures, Measure{Column: m.Column, Aggregate: Aggregate(m.Kind), Expression: m.Expression,
				Type: m.Type, Log2m: m.Log2m, Regwidth: m.Regwidth, Hash: m.Hash})
		}
		for _, l := range j.Levels {
			g, err := ParseGrain(l.Grain)
			if err != nil || g.Rank() <= r.Grain.Rank() {
				return nil, fmt.Errorf("catalog: rollup %s: level %q", j.Name, l.Grain)
			}
			r.Levels = append(r.Levels, Level{Grain: g, Table: Table{Schema: l.Schema, Name: l.Table}})
		}
		// Coarsest first.
		slices.SortFunc(r.Levels, func(a, b Level) int { return b.Grain.Rank() - a.Grain.Rank() })
		out = append(out, r)
	}
	return NewSnapshot(out), nil
}
