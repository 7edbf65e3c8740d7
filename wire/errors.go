package wire

import "github.com/jackc/pgx/v5/pgproto3"

// SQLSTATE codes the proxy itself reports.
const (
	sqlstateConnectionFailure = "08006" // connection_failure
	sqlstateCannotConnect     = "08001" // sqlclient_unable_to_establish_sqlconnection
	sqlstateProtocolViolation = "08P01" // protocol_violation
	sqlstateProgramLimit      = "54000" // program_limit_exceeded
	sqlstateAdminShutdown     = "57P01" // admin_shutdown
	sqlstateFeatureNotSupp    = "0A000" // feature_not_supported
)

// fatal encodes a FATAL ErrorResponse from the proxy.
func fatal(code, msg string) []byte {
	b, _ := (&pgproto3.ErrorResponse{
		Severity:            "FATAL",
		SeverityUnlocalized: "FATAL",
		Code:                code,
		Message:             msg,
	}).Encode(nil)
	return b
}
