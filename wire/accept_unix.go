package wire

import "syscall"

// errTooManyFiles is the accept error worth retrying after a pause.
var errTooManyFiles = syscall.EMFILE
