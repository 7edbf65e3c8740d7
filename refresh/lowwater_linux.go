package refresh

import (
	"net"
	"syscall"
)

// setLowWater sets the socket's receive low-water mark and reports whether
// it did.
func setLowWater(c *net.TCPConn, n int) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
	}); err != nil {
		return false
	}
	return serr == nil
}
