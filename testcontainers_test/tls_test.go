package e2e

import "testing"

// selfSignedCert writes a self-signed certificate for 127.0.0.1 and localhost
// and its key to the test's temporary directory and returns the two paths,
// for `serve --tls-cert --tls-key`.
func selfSignedCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	return writeSelfSignedCert(t, t.TempDir(), nil)
}
