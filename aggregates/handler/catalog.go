package handler

import (
	"context"
	"errors"
	"fmt"

	"github.com/pgsketch/pgsketch/aggregates/catalog"
	"github.com/pgsketch/pgsketch/wire"
)

var errCatalog = errors.New("rollup catalog")

// loadCatalog reads the rollup catalog as the client's role, in its
// transaction (so it sees what the client may see, as of its snapshot).
func (h *Handler) loadCatalog(ctx context.Context, c *sessionConn) (*catalog.Snapshot, error) {
	rows, err := c.Query(ctx, catalog.Query)
	if err != nil {
		return nil, err
	}
	if len(rows) != 1 || len(rows[0]) != 1 {
		return nil, fmt.Errorf("%w: %d rows", errCatalog, len(rows))
	}
	snap, err := catalog.Parse(rows[0][0])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCatalog, err)
	}
	return snap, nil
}

// catalogFor returns the catalog snapshot for the session.
func (h *Handler) catalogFor(ctx context.Context, c *sessionConn, s *wire.Session) (*catalog.Snapshot, error) {
	return h.loadCatalog(ctx, c)
}
