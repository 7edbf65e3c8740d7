package plan

import "strings"

// NamesRelativeTime reports whether s holds one of the date and time
// inputs 'now', 'today', 'tomorrow' and 'yesterday', which PostgreSQL
// reads as the time of the statement: the same text then selects other
// rows from one day (or moment) to the next. PostgreSQL takes them in any
// case, padded, and within longer input ('today 10:00', 'yesterday
// Europe/Berlin'), so any run of letters that spells one counts.
func NamesRelativeTime(s string) bool {
	letter := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	for i := 0; i < len(s); {
		if !letter(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && letter(s[j]) {
			j++
		}
		switch strings.ToLower(s[i:j]) {
		case "now", "today", "tomorrow", "yesterday":
			return true
		}
		i = j
	}
	return false
}
