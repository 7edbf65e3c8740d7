//go:build !linux

package refresh

import "net"

// setLowWater is a no-op outside Linux, where how polling honours the mark
// was not measured.
func setLowWater(*net.TCPConn, int) bool { return false }
