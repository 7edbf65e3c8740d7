# The README's two commands are `make run` and `make test`. Each installs the
# Debian packages it needs, and only those (scripts/install-deps.sh run|test),
# before anything else: the demo no browser and no Node.js.

GO                  ?= go
BIN                 := bin/pgsketch-proxy
STATICCHECK_VERSION := v0.8.2
GO_FILES             = $(shell find . -name '*.go' -not -path './.git/*')

.PHONY: run test deps deps-run build lint unit accuracy bench clean

## run: the demo: a throwaway PostgreSQL with hll, the catalog, a generated events table and its rollup, behind the proxy
run: deps-run build
	./$(BIN) demo

## test: lint, then every test (unit and end-to-end against a real PostgreSQL)
test: deps lint
	$(GO) test -race -count=1 -timeout 45m ./...
	# Again without -race: race builds relay with net.Conn's own calls, the
	# others with raw system calls (wire/rawio_linux.go).
	$(GO) test -count=1 -timeout 45m ./wire/ ./testcontainers_test/

deps:
	@./scripts/install-deps.sh test

deps-run:
	@./scripts/install-deps.sh run

build:
	$(GO) build -o $(BIN) ./cmd/pgsketch-proxy

## lint: gofmt, go vet, staticcheck (pinned)
lint:
	@out=$$(gofmt -l $(GO_FILES)); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags citus ./citus_test/
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags citus ./citus_test/

## accuracy: the estimator's bias and RSE table (docs/accuracy.md, docs/accuracy.png)
accuracy:
	$(GO) run ./scripts/accuracy

## accuracy-theta: INTERSECT and EXCEPT answers from Theta sketches against exact counts, by Jaccard index
.PHONY: accuracy-theta
accuracy-theta:
	$(GO) run ./scripts/thetaaccuracy

## bench: the benchmarks recorded in docs/benchmarks.md
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./sketch/

## bench-rewrite: the rewriter over the golden corpus, and a query the prefilter rejects (docs/benchmarks.md)
.PHONY: bench-rewrite
bench-rewrite:
	$(GO) test -run '^$$' -bench . -benchtime 100x -count 3 ./rewrite/
	$(GO) test -run '^$$' -bench Rejected -benchmem -count 3 ./rewrite/

## bench-relay: pgbench -S direct, through PgBouncer and through pgsketch-proxy (docs/benchmarks.md);
## BENCH_RELAY_ARGS=--quick for a 20-second check of the setup
## pgx-suite: the pgx v5.12 driver's own test suite directly and through pgsketch-proxy; lists the tests
## that pass directly and fail through the proxy (PGX_SUITE_ARGS, e.g. --run Timeout)
.PHONY: pgx-suite
pgx-suite: deps
	./scripts/pgx-suite.sh $(PGX_SUITE_ARGS)

## bench-rollup: pgsketch's rollup build against hll_add_agg in PostgreSQL (docs/benchmarks.md)
.PHONY: bench-rollup
bench-rollup: deps
	./scripts/bench-rollup.sh $(BENCH_ROLLUP_ARGS)

## bench-query: "one month, distinct users by country" through the proxy (cold and warm) against exact
## and hll_union_agg in PostgreSQL, 20 M events (docs/benchmarks.md); BENCH_QUERY_ARGS="--keep DIR" reuses the data
.PHONY: bench-query
bench-query: deps
	./scripts/bench-query.sh $(BENCH_QUERY_ARGS)

## bench-query-matrix: the rollup rollup create makes, six ranges (one ragged) by three groupings, cold, warm and new connection, simple protocol and pgx, against exact and hll_union_agg (docs/benchmarks.md)
.PHONY: bench-query-matrix
bench-query-matrix: deps
	./scripts/bench-query.sh --matrix --runs 9 --exact-runs 3 $(BENCH_QUERY_ARGS)

## bench-overlap: a Theta column's build cost and storage, and INTERSECT / EXCEPT / NOT IN counts through the proxy
## (cold and warm) against exact, 20 M events (docs/benchmarks.md); BENCH_OVERLAP_ARGS="--keep DIR" reuses the data
.PHONY: bench-overlap
bench-overlap: deps
	./scripts/bench-overlap.sh $(BENCH_OVERLAP_ARGS)

## bench-topk: top 10 users (a month, a week, all time) and users above a threshold, exact in PostgreSQL against
## the proxy's verified and approx modes, without and with an index on user_id, 20 M events (docs/benchmarks.md);
## BENCH_TOPK_ARGS="--keep DIR" reuses the data
.PHONY: bench-topk
bench-topk: deps
	./scripts/bench-topk.sh $(BENCH_TOPK_ARGS)

## bench-capture: change capture's cost to writers (1 M-row INSERT ... SELECT, 10000 one-row INSERTs, with and
## without the triggers) and to queries with changed buckets (docs/benchmarks.md); BENCH_CAPTURE_ARGS="--rows 20000000"
.PHONY: bench-capture
bench-capture: deps
	./scripts/bench-capture.sh $(BENCH_CAPTURE_ARGS)

## test-citus: the Citus end-to-end suite (citus_test/, build tag citus): a coordinator and two workers, pgsketch
## against tables distributed by Citus (docs/testing.md); installs Citus 13.2.2 first when missing (scripts/citus.sh,
## from PGSKETCH_CITUS_TARBALL, default ../shared/vendor/citus/citus-13.2.2.tar.gz), which needs root
.PHONY: test-citus
test-citus: deps-run
	./scripts/citus.sh
	$(GO) test -count=1 -tags citus -v -timeout 30m ./citus_test/

## soak: the 50-client soak test for longer (SOAK_DURATION, default 10m); make test runs it for 60 s
.PHONY: soak
SOAK_DURATION ?= 10m
soak: deps
	PGSKETCH_SOAK_DURATION=$(SOAK_DURATION) $(GO) test -count=1 -run '^TestSoak$$' -v -timeout 2h ./testcontainers_test/

.PHONY: bench-relay
bench-relay: deps
	./scripts/bench-relay.sh $(BENCH_RELAY_ARGS)

clean:
	rm -rf bin
