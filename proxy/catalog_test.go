package proxy

import (
	"fmt"
	"testing"

	"github.com/pgsketch/pgsketch/catalog"
)

func TestCatalogCache(t *testing.T) {
	var cc catalogCache
	a, b := catalog.NewSnapshot(nil), catalog.NewSnapshot(nil)
	if cc.get("db", "x") != nil {
		t.Fatal("empty cache answered")
	}
	cc.put("db", "x", a)
	cc.put("other", "x", b)
	if cc.get("db", "x") != a || cc.get("other", "x") != b || cc.get("db", "y") != nil {
		t.Fatal("wrong snapshot")
	}
	for i := range maxSnapshots + 1 {
		cc.put("db", fmt.Sprint(i), a)
	}
	if n := len(cc.m["db"]); n > maxSnapshots {
		t.Fatalf("%d snapshots kept, want at most %d", n, maxSnapshots)
	}
}
