package wire

import (
	"bytes"
)

// statementTracker remembers the prepared statements and portals whose
// Parse or Bind a Handler took, so that later Bind, Describe, Execute and
// Close on them go to the Handler too. Names marked in the open group count
// only once the group is served; if it goes upstream instead, the upstream
// holds those names and the marks are dropped.
type statementTracker struct {
	stmts   map[string]bool
	portals map[string]bool
	marks   []trackMark
}

type trackMark struct {
	portal bool
	name   string
}

func (tr *statementTracker) has(portal bool, name []byte) bool {
	m := tr.stmts
	if portal {
		m = tr.portals
	}
	if m[string(name)] {
		return true
	}
	for _, mk := range tr.marks {
		if mk.portal == portal && mk.name == string(name) {
			return true
		}
	}
	return false
}

// unmark drops the open group's marks of a name that an unwanted Parse or
// Bind later in the group gave to the upstream.
func (tr *statementTracker) unmark(portal bool, name []byte) {
	k := 0
	for _, mk := range tr.marks {
		if mk.portal != portal || mk.name != string(name) {
			tr.marks[k] = mk
			k++
		}
	}
	tr.marks = tr.marks[:k]
}

// served applies the open group's marks; passed drops them.
func (tr *statementTracker) served() {
	for _, mk := range tr.marks {
		if mk.portal {
			tr.portals[mk.name] = true
		} else {
			tr.stmts[mk.name] = true
		}
	}
	tr.marks = tr.marks[:0]
}

func (tr *statementTracker) passed() {
	for _, mk := range tr.marks {
		if mk.portal {
			delete(tr.portals, mk.name)
		} else {
			delete(tr.stmts, mk.name)
		}
	}
	tr.marks = tr.marks[:0]
}

// streamed updates the tracker for a message that goes upstream unread (too
// big to inspect); head is the start of its body. Parse and Bind replace the
// statement or portal they name, a Close removes one: that name is no longer
// the Handler's. If the name is not in head, everything is forgotten. It
// reports a Bind of a statement the Handler owns: the upstream does not have
// that statement (or has an older one of the same name), so the session
// cannot go on.
func (tr *statementTracker) streamed(typ byte, head []byte) (conflict bool) {
	switch typ {
	case 'P', 'B':
		if i := bytes.IndexByte(head, 0); i >= 0 {
			if typ == 'P' {
				delete(tr.stmts, string(head[:i]))
				return false
			}
			delete(tr.portals, string(head[:i]))
			stmt, _ := cstring(head[i+1:])
			return tr.stmts[string(stmt)]
		}
	case 'C':
		if len(head) > 1 {
			if i := bytes.IndexByte(head[1:], 0); i >= 0 {
				if head[0] == 'S' {
					delete(tr.stmts, string(head[1:1+i]))
				} else {
					delete(tr.portals, string(head[1:1+i]))
				}
				return false
			}
		}
	default:
		return false
	}
	clear(tr.stmts)
	clear(tr.portals)
	tr.marks = tr.marks[:0]
	return false
}

// loopWants is the event loop's question, with no open group: whether the
// Handler wants the Bind, Describe, Execute or Close with this body (one
// naming a statement or portal it owns); a Parse or Bind it does not want
// forgets the name it replaces, as wants does. A Parse the loop asks
// Handler.Intercept about itself.
func (tr *statementTracker) loopWants(typ byte, body []byte) bool {
	if len(tr.stmts) == 0 && len(tr.portals) == 0 {
		return false
	}
	switch typ {
	case 'P':
		name, _ := cstring(body)
		delete(tr.stmts, string(name))
	case 'B':
		portal, rest := cstring(body)
		stmt, _ := cstring(rest)
		if tr.stmts[string(stmt)] {
			return true
		}
		delete(tr.portals, string(portal))
	case 'D', 'C':
		if len(body) < 1 {
			return false
		}
		name, _ := cstring(body[1:])
		if body[0] == 'S' {
			return tr.stmts[string(name)]
		}
		return tr.portals[string(name)]
	case 'E':
		portal, _ := cstring(body)
		return tr.portals[string(portal)]
	case 'Q': // a Query drops the unnamed statement and portal
		delete(tr.stmts, "")
		delete(tr.portals, "")
	}
	return false
}

// wants updates the tracker with an extended-protocol message and reports
// whether the Handler wants it.
func (tr *statementTracker) wants(h Handler, typ byte, body []byte, inspectSize int) bool {
	switch typ {
	case 'P':
		name, rest := cstring(body)
		query, _ := cstring(rest)
		if len(query) <= inspectSize && h.Intercept(query) {
			tr.marks = append(tr.marks, trackMark{false, string(name)})
			return true
		}
		delete(tr.stmts, string(name))
		if len(tr.marks) > 0 {
			tr.unmark(false, name)
		}
	case 'B':
		if len(tr.stmts) == 0 && len(tr.portals) == 0 && len(tr.marks) == 0 {
			return false
		}
		portal, rest := cstring(body)
		stmt, _ := cstring(rest)
		if tr.has(false, stmt) {
			tr.marks = append(tr.marks, trackMark{true, string(portal)})
			return true
		}
		delete(tr.portals, string(portal))
		if len(tr.marks) > 0 {
			tr.unmark(true, portal)
		}
	case 'D', 'C':
		if len(body) < 1 || len(tr.stmts) == 0 && len(tr.portals) == 0 && len(tr.marks) == 0 {
			return false
		}
		name, _ := cstring(body[1:])
		return tr.has(body[0] != 'S', name)
	case 'E':
		if len(tr.portals) == 0 && len(tr.marks) == 0 {
			return false
		}
		portal, _ := cstring(body)
		return tr.has(true, portal)
	}
	return false
}
