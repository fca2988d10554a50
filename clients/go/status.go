package liverelay

import "strconv"

// Status is a call's outcome, gRPC's 17 codes with gRPC's numbers
// (docs/PROTOCOL.md, section 7). A successful call returns no error, so a
// *Error never carries OK.
type Status uint8

// The statuses. What each means in LiveRelay is in docs/PROTOCOL.md, section 7.
const (
	OK                 Status = 0
	Cancelled          Status = 1
	Unknown            Status = 2
	InvalidArgument    Status = 3
	DeadlineExceeded   Status = 4
	NotFound           Status = 5
	AlreadyExists      Status = 6
	PermissionDenied   Status = 7
	ResourceExhausted  Status = 8
	FailedPrecondition Status = 9
	Aborted            Status = 10
	OutOfRange         Status = 11
	Unimplemented      Status = 12
	Internal           Status = 13
	Unavailable        Status = 14
	DataLoss           Status = 15
	Unauthenticated    Status = 16
)

var statusNames = [...]string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED",
}

// String is the status's name as docs/PROTOCOL.md writes it, e.g. "NOT_FOUND".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "STATUS_" + strconv.Itoa(int(s))
}
