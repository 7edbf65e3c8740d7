package benchkit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// LoadAvg is the first three fields of /proc/loadavg.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "? ? ?"
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times
// (100 on Linux's supported architectures).
const clockTicks = 100

// ProcCPU is the CPU time (user and system) process pid has used, read
// from /proc/PID/stat; 0 when it cannot be read.
func ProcCPU(pid uint32) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0
	}
	f := strings.Fields(s[i+2:]) // from field 3, state
	if len(f) < 13 {
		return 0
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(u+st) * time.Second / clockTicks
}
