package rewrite

import (
	"strconv"
	"strings"
)

// PostgreSQL reads a zone given to AT TIME ZONE, timezone() or date_trunc
// first as a time zone abbreviation of the session's timezone_abbreviations
// set, and only then as a tz database name: 'EST' is UTC−5 under the
// Default set and UTC+10 under the Australia set, and 'CET' is a fixed
// UTC+1 there, while SET TimeZone = 'CET' names the tz database's zone,
// which keeps summer time. The rewriter reasons about zones with Go's copy
// of the tz database, so a zone that may be an abbreviation is one it
// cannot read; the UTC spellings are UTC in every shipped set.

// pgAbbreviations are the abbreviations of the sets PostgreSQL 15 ships
// (share/timezonesets Default, Australia and India), lowercased, as
// TestAbbreviationsAsShipped checks against the installed files.
var pgAbbreviations = func() map[string]bool {
	m := map[string]bool{}
	for _, a := range strings.Fields(`
acdt acsst acst act acwst adt aedt aesst aest aft akdt akst almst almt amst amt anast anat
arst art ast awsst awst azost azot azst azt bdst bdt bnt bort bot bra brst brt bst btt
cadt cast cct cdt cest cet cetdst chadt chast chut ckt clst clt cot cst cxt davt ddut
easst east eat edt eest eet eetdst egst egt est fet fjst fjt fkst fkt fnst fnt galt gamt
gest get gft gilt gmt gyt hkt hst ict idt iot irkst irkt irt ist jayt jst kdt kgst kgt
kost krast krat kst lhdt lhst ligt lint lkt magst magt mart mawt mdt mest mesz met metdst
mez mht mmt mpt msd msk mst must mut mvt myt ndt nft novst novt npt nst nut nzdt nzst nzt
omsst omst pdt pet petst pett pgt pht pkst pkt pmdt pmst pont pst pwt pyst pyt ret sadt
sast sat sct sgt taht tft tjt tkt tmt tot trut tvt uct ulast ulat ut utc uyst uyt uzst uzt
vet vlast vlat volt vut wadt wakt wast wat wdt wet wetdst wft wgst wgt wst xjt yakst yakt
yapt yekst yekt z zulu`) {
		m[a] = true
	}
	return m
}()

// utcAbbreviations are 0 in every shipped set, as in the tz database.
var utcAbbreviations = map[string]bool{"gmt": true, "uct": true, "ut": true, "utc": true, "z": true, "zulu": true}

// shippedAbbreviationSets are the timezone_abbreviations values whose
// abbreviations pgAbbreviations holds ("" is a session that did not say:
// the Default set).
var shippedAbbreviationSets = map[string]bool{"": true, "Default": true, "Australia": true, "India": true}

// zoneAbbreviation reports whether PostgreSQL may read zone, given as an
// argument, as a time zone abbreviation other than UTC's (it lowercases
// the zone first).
func zoneAbbreviation(zone string) bool {
	z := strings.ToLower(zone)
	for _, a := range []string{z, strings.TrimSpace(z)} {
		if pgAbbreviations[a] && !utcAbbreviations[a] {
			return true
		}
	}
	return false
}

// AbbreviatedZone says why a rollup cut in zone would never answer a
// query (PostgreSQL may read the name as a time zone abbreviation, whose
// meaning each session's timezone_abbreviations decides), or "".
func AbbreviatedZone(zone string) string { return abbreviationWhy(zone) }

// abbreviationWhy says why zone, given as an argument, cannot be read, or "".
func abbreviationWhy(zone string) string {
	if !zoneAbbreviation(zone) {
		return ""
	}
	return "time zone " + strconv.Quote(zone) + " is a time zone abbreviation to PostgreSQL, whose meaning the session's timezone_abbreviations decides"
}
