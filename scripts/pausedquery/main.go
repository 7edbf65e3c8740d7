// Command pausedquery times one query asked through several servers in
// turn, each on a long-lived connection of pgconn's simple protocol, with a
// pause before every query, and prints each server's median and quartiles.
// It measures an answer that starts from an idle machine (as a dashboard's
// tiles and the matrix of bench-query do), against the same answer back to
// back (-pause 0), and compares proxies built from different commits
// within one run. With -param (repeated: $1, $2, ...) the query is sent
// with the extended protocol and those parameters, as text of unspecified
// type. With -q given once per URL, each server gets its own query (the
// proxy's COUNT(DISTINCT) against hll_union_agg over the rollup, say):
//
//	go run ./scripts/pausedquery -n 150 -pause 50ms -q "SELECT ..." URL1 URL2
//	go run ./scripts/pausedquery -q "... created_at >= $1 ..." -param 2026-02-09 URL
//	go run ./scripts/pausedquery -q "SELECT count(DISTINCT ...) ..." -q "SELECT hll_union_agg(...) ..." PROXY DB
//
// With -prepare as well, the query is prepared once per connection and
// executed by name, as the proxy executes its fetch.
//
// -pre and -post run statements around each query on its connection,
// timed with it (a transaction block, say), and -binary asks for the
// results of a query with -param in binary, as the proxy does:
//
//	go run ./scripts/pausedquery -pre "BEGIN ISOLATION LEVEL REPEATABLE READ" -post COMMIT \
//	    -binary -param 2026-02-01 -param 2026-03-01 -q "$FETCH" -q "$OTHER" DB DB
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func main() {
	n := flag.Int("n", 100, "queries per server")
	pause := flag.Duration("pause", 50*time.Millisecond, "pause before each query")
	var qs []string
	flag.Func("q", "the query; given once per URL, each URL's own", func(v string) error {
		qs = append(qs, v)
		return nil
	})
	pre := flag.String("pre", "", "statements run before each query on its connection, timed with it")
	post := flag.String("post", "", "statements run after each query on its connection, timed with it")
	binary := flag.Bool("binary", false, "with -param: results in binary")
	prepare := flag.Bool("prepare", false, "with -param: prepare the query once per connection and execute it by name, as the proxy does (PostgreSQL's plan cache then chooses a generic plan after five)")
	var params []string
	flag.Func("param", "a parameter of the query ($1, then $2, ...); repeat the flag for each", func(v string) error {
		params = append(params, v)
		return nil
	})
	flag.Parse()
	args := make([][]byte, len(params))
	for i, p := range params {
		args[i] = []byte(p)
	}
	if len(qs) == 0 || flag.NArg() == 0 || len(qs) > 1 && len(qs) != flag.NArg() {
		fmt.Fprintln(os.Stderr, "usage: pausedquery [-n N] [-pause D] -q QUERY [-q QUERY per URL] URL...")
		os.Exit(2)
	}
	query := func(k int) string {
		if len(qs) == 1 {
			return qs[0]
		}
		return qs[k]
	}
	ctx := context.Background()
	conns := make([]*pgconn.PgConn, flag.NArg())
	fromRollup := make([]int, flag.NArg()) // answers with pgsketch's NOTICE of a rollup
	for i, u := range flag.Args() {
		cfg, err := pgconn.ParseConfig(u)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			if strings.Contains(n.Message, "from rollup") {
				fromRollup[i]++
			}
		}
		c, err := pgconn.ConnectConfig(ctx, cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer c.Close(ctx)
		conns[i] = c
		if *prepare && len(args) > 0 {
			if _, err := c.Prepare(ctx, "pausedquery", query(i), nil); err != nil {
				fmt.Fprintf(os.Stderr, "%s: prepare: %v\n", u, err)
				os.Exit(1)
			}
		}
	}
	times := make([][]time.Duration, len(conns))
	for i := range *n {
		for j := range conns {
			k := (i + j) % len(conns) // the order rotates
			time.Sleep(*pause)
			t0 := time.Now()
			var err error
			if *pre != "" {
				_, err = conns[k].Exec(ctx, *pre).ReadAll()
			}
			if err == nil && len(args) > 0 {
				var formats []int16
				if *binary {
					formats = []int16{1}
				}
				if *prepare {
					err = conns[k].ExecPrepared(ctx, "pausedquery", args, nil, formats).Read().Err
				} else {
					err = conns[k].ExecParams(ctx, query(k), args, nil, nil, formats).Read().Err
				}
			} else if err == nil {
				_, err = conns[k].Exec(ctx, query(k)).ReadAll()
			}
			if err == nil && *post != "" {
				_, err = conns[k].Exec(ctx, *post).ReadAll()
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", conns[k].Conn().RemoteAddr(), err)
				os.Exit(1)
			}
			times[k] = append(times[k], time.Since(t0))
		}
	}
	for k, t := range times {
		slices.Sort(t)
		fmt.Printf("%s: median %.3f ms (quartiles %.3f–%.3f), %d queries, %d answered from a rollup\n", conns[k].Conn().RemoteAddr(),
			ms(t[len(t)/2]), ms(t[len(t)/4]), ms(t[3*len(t)/4]), len(t), fromRollup[k])
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
