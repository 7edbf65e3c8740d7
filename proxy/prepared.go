package proxy

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/upstream"
)

// preparedStmts are the proxy's own statements prepared upstream in one
// session, by SQL and parameter types, the most recently used first; at
// most maxPrepared are kept (the oldest is closed to make room).
type preparedStmts struct {
	// prefix starts their names (preparedPrefix if empty); max bounds
	// them (maxPrepared if 0).
	prefix string
	max    int
	// settings are the session's settings PostgreSQL reads when it
	// parses a statement (sessionSettings.parse), as the statements about
	// to be sent are planned in: part of the key, since a literal such as
	// '2026-01-10'::timestamptz is converted at parse time, in the
	// session's TimeZone.
	settings string
	byKey    map[stmtKey]string
	order    []stmtKey // least recently used first
	next     int
}

// stmtKey identifies a prepared statement: its SQL, its parameters' types
// and the settings it was parsed in. Its fields share the strings they
// come from: a fetch statement is several KB, and a key is made for every
// statement run.
type stmtKey struct{ sql, oids, settings string }

// maxPrepared bounds the proxy's prepared statements per session.
const maxPrepared = 64

// preparedPrefix starts their names (reserved with internalName).
const preparedPrefix = internalName + "_"

// name returns the statement name for st: fresh when it must be prepared
// now; evicted, when set, names a statement to close first.
func (p *preparedStmts) name(st upstream.Statement) (name string, fresh bool, evicted string) {
	key := p.key(st)
	if p.byKey == nil {
		p.byKey = map[stmtKey]string{}
	}
	if n, ok := p.byKey[key]; ok {
		if i := slices.Index(p.order, key); i >= 0 {
			p.order = append(slices.Delete(p.order, i, i+1), key)
		}
		return n, false, ""
	}
	if len(p.order) >= cmp.Or(p.max, maxPrepared) {
		old := p.order[0]
		evicted = p.byKey[old]
		delete(p.byKey, old)
		p.order = p.order[1:]
	}
	p.next++
	name = cmp.Or(p.prefix, preparedPrefix) + strconv.Itoa(p.next)
	p.byKey[key] = name
	p.order = append(p.order, key)
	return name, true, evicted
}

// forget forgets st's statement.
func (p *preparedStmts) forget(st upstream.Statement) {
	key := p.key(st)
	delete(p.byKey, key)
	if i := slices.Index(p.order, key); i >= 0 {
		p.order = slices.Delete(p.order, i, i+1)
	}
}

func (p *preparedStmts) key(st upstream.Statement) stmtKey {
	return stmtKey{st.SQL, fmt.Sprint(st.ParamOIDs), p.settings}
}

// reset forgets every prepared statement (the client dropped them).
func (p *preparedStmts) reset() {
	clear(p.byKey)
	p.order = p.order[:0]
}

// isMissingStatement reports PostgreSQL's "prepared statement does not
// exist".
func isMissingStatement(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "26000"
}
