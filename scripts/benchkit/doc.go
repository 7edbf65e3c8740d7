// Package benchkit is what the benchmark and measurement programs under
// scripts/ share: a throwaway PostgreSQL 15 cluster with the hll extension
// and the pgsketch catalog (Cluster, Database, Open, Prepare), the flags
// they share (EventFlags, DSNFlag, KeepFlag, ProxyFlag, NeedProxy), the
// generated events table and a rollup's levels (Events, Generate,
// SetLevels), the order of interleaved rounds (Rotation, Spacing),
// statistics (Median, Percentile, Spread), the time and load of the
// machine and its processes (ProcCPU, LoadAvg), how durations print (Ms),
// trials spread over the CPUs (Parallel, SplitMix64) and how a program
// ends (Run, Exit).
package benchkit
