// Package localpg starts and removes throwaway PostgreSQL clusters made with
// the local initdb and pg_ctl.
//
// It is used by the end-to-end test harness (testcontainers_test) when neither
// PGSKETCH_TEST_DSN nor a Docker engine is available, by the Citus suite, by
// the benchmarks (scripts/benchkit) and by `pgsketch-proxy demo`. TestServer
// gives a package's tests the server PGSKETCH_TEST_DSN names or a throwaway
// cluster; WithDatabase names another database in a connection string.
//
// A cluster lives in a temporary directory, listens on 127.0.0.1 on a free
// port, trusts local connections, and is removed by Remove. When the
// calling process dies without calling Remove (a panic, a test timeout,
// SIGKILL), a small watchdog process stops the server and removes the
// directory, so no cluster outlives its owner.
//
// When the caller is root, initdb and the server run as the "postgres" OS user,
// because PostgreSQL refuses to run as root.
package localpg
