package exec

import "strings"

// Settings are the session settings that decide how PostgreSQL prints
// values, as current_setting returns them.
type Settings struct {
	DateStyle, TimeZone, IntervalStyle, ExtraFloatDigits, ByteaOutput, ClientEncoding string
}

// Pinned are the settings the refresher prints values under before hashing
// them (docs/design.md §2.2; refresh.PinnedSettings).
var Pinned = Settings{DateStyle: "ISO, MDY", TimeZone: "UTC", IntervalStyle: "postgres",
	ExtraFloatDigits: "3", ByteaOutput: "hex", ClientEncoding: "UTF8"}

// settingFree are the types whose output text no setting but the client
// encoding changes.
var settingFree = map[string]bool{
	"smallint": true, "integer": true, "bigint": true, "text": true, "uuid": true, "boolean": true,
	"name": true, `"char"`: true, "oid": true, "citext": true, "inet": true, "cidr": true,
	"macaddr": true, "macaddr8": true,
}

// CanonicalText reports whether the session prints values of type typ (the
// catalog's format_type spelling of an HLL measure's type) exactly as the
// refresher hashed them, so that the base rows the fetch returns in text
// format can be hashed as they are.
func CanonicalText(typ string, s Settings) bool {
	if !strings.EqualFold(s.ClientEncoding, "UTF8") {
		return false
	}
	base, _, _ := strings.Cut(typ, "(")
	switch base {
	case "character varying", "character", "numeric":
		return true
	case "money":
		return false // lc_monetary
	}
	if settingFree[typ] {
		return true
	}
	p := Pinned
	return s.DateStyle == p.DateStyle && s.TimeZone == p.TimeZone && s.IntervalStyle == p.IntervalStyle &&
		s.ExtraFloatDigits == p.ExtraFloatDigits && s.ByteaOutput == p.ByteaOutput
}
