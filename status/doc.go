// Package status keeps what pgsketch-proxy did recently and renders the
// status page served on --http-listen: the rollups with their freshness and
// size, what the background refresher does or why it cannot (its counters
// also as Prometheus metrics: Refresher.WritePrometheus), the last queries
// answered from rollups and passed through (with the
// plan or the reason and the latency), the rollup answers that failed when
// they ran and were answered exactly instead (counted by reason, also as
// Prometheus metrics: Recorder.WritePrometheus), and a chart of the
// relative error observed where a query computed a distinct count both
// exactly and approximately.
//
// The page is plain server-rendered HTML with inline SVG: no scripts, no
// build step. The Recorder is safe for concurrent use and bounded.
package status
