// Package benchkit is what the benchmark programs under scripts/ share:
// a throwaway PostgreSQL 15 cluster with the hll extension and the
// pgsketch catalog (Cluster, Prepare), statistics (Median, MedianFloat),
// the time and load of the machine and its processes (ProcCPU, LoadAvg),
// and how durations print (Ms).
package benchkit
