package liverelay

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/liverelay/liverelay/clients/go/liverelaypb"
)

// Processing says whether the server acted on a failed call, as far as the
// client can know. It, not the status alone, decides whether sending the
// same request again is safe (docs/PROTOCOL.md, section 9).
type Processing uint8

const (
	// NotProcessed: the server certainly did not act on the call (it never
	// left the client, the server refused it before doing anything, or it
	// was above a GOAWAY's last request id). Sending it again is safe.
	NotProcessed Processing = iota + 1
	// MayHaveBeenProcessed: the call's fate is unknown (its connection broke
	// while it was outstanding, its deadline passed or it was cancelled after
	// it was sent, or the server's store lost track of a commit: reason
	// OutcomeUnknown). Send it again only if it is idempotent: with the same
	// idempotency key, or an RPC that is idempotent by nature.
	MayHaveBeenProcessed
	// Answered: the server answered the call with this error.
	Answered
)

func (p Processing) String() string {
	switch p {
	case NotProcessed:
		return "not processed"
	case MayHaveBeenProcessed:
		return "may have been processed"
	case Answered:
		return "answered"
	}
	return "Processing(" + strconv.Itoa(int(p)) + ")"
}

// Reasons the client sets on errors it makes itself; the server's reasons
// (ActivityNotFound, QueueFull, ...) are listed in docs/PROTOCOL.md, section 7.
const (
	// ReasonOutcomeUnknown is the server's reason for an UNAVAILABLE call
	// that may or may not have taken effect.
	ReasonOutcomeUnknown = "OutcomeUnknown"
	// ReasonTooManyConnections: the server refused a connection because the
	// API key has as many as it allows (GOAWAY TOO_MANY_CONNECTIONS).
	ReasonTooManyConnections = "TooManyConnections"
	// ReasonAPIKeyRefused: the server refused the API key at HELLO.
	ReasonAPIKeyRefused = "APIKeyRefused"
	// ReasonAPIKeyRevoked: the server accepted the key earlier and refuses
	// it now (revoked, or its rights changed).
	ReasonAPIKeyRevoked = "APIKeyRevoked"
)

// Sentinel errors, for errors.Is. A *Error wraps one of them when it is the cause.
var (
	// ErrTooManyConnections: the server refused connections because the API
	// key is at its limit of connections per key. Not final: the client
	// retries on new connections after a back-off, and this is what a call
	// returns when every attempt was refused.
	ErrTooManyConnections = errors.New("liverelay: the API key has as many connections as the server allows")
	// ErrAPIKeyRefused: the server refused the API key (unknown, malformed,
	// revoked). Final for the client: no other connection with the key is
	// tried, and every call fails with it. It also matches a revoked key.
	ErrAPIKeyRefused = errors.New("liverelay: the server refused the API key")
	// ErrAPIKeyRevoked: the key worked on this client and the server refuses
	// it now, because it was revoked (or its rights changed). Final, like
	// ErrAPIKeyRefused, which errors.Is also matches.
	ErrAPIKeyRevoked = errors.New("liverelay: the API key was revoked")
	// ErrClientClosed: Close was called.
	ErrClientClosed = errors.New("liverelay: the client is closed")
)

// FieldViolation names one offending field of a request, by its path in the
// request with the .proto's field names ("targets.push_to_start_tokens[3]").
type FieldViolation struct {
	Field       string
	Description string
}

// Error is a failed call: the server's ERROR answer, or the client's verdict
// when no answer could come (deadline, cancellation, lost connection, no
// server, a refused key). Every error a Client method returns is a *Error:
//
//	var e *liverelay.Error
//	if errors.As(err, &e) && e.Status == liverelay.NotFound { ... }
//
// Context errors are wrapped: errors.Is(err, context.DeadlineExceeded) holds
// for a call that ran out of time on the client.
type Error struct {
	// Status is never OK.
	Status Status
	// Message is for people and logs; match on Status and Reason.
	Message string
	// Reason is the server's stable machine-readable reason (QueueFull,
	// ActivityEnded, ...), or one of the client's Reason constants; may be empty.
	Reason string
	// FieldViolations name the offending fields of an INVALID_ARGUMENT.
	FieldViolations []FieldViolation
	// RetryAfter is when a retry may succeed (RESOURCE_EXHAUSTED, UNAVAILABLE); 0 when not given.
	RetryAfter time.Duration
	// Processing says whether the call may have taken effect.
	Processing Processing

	cause error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("liverelay: ")
	b.WriteString(e.Status.String())
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Reason != "" {
		b.WriteString(" (reason ")
		b.WriteString(e.Reason)
		b.WriteString(")")
	}
	for _, v := range e.FieldViolations {
		if e.Message == v.Field+": "+v.Description {
			continue // the server's message is often the one violation
		}
		b.WriteString("; ")
		b.WriteString(v.Field)
		b.WriteString(": ")
		b.WriteString(v.Description)
	}
	if e.RetryAfter > 0 {
		b.WriteString("; retry after ")
		b.WriteString(e.RetryAfter.String())
	}
	return b.String()
}

// Unwrap returns the cause: a context error, one of the package's sentinel
// errors, or a network or TLS error; nil for the server's answers.
func (e *Error) Unwrap() error { return e.cause }

// Is makes a revoked key match ErrAPIKeyRefused as well as ErrAPIKeyRevoked.
func (e *Error) Is(target error) bool {
	return target == ErrAPIKeyRefused && e.cause == ErrAPIKeyRevoked
}

// Retryable reports whether the same request may be sent again as is,
// idempotent or not: the server certainly did not process it, or asked for a
// later retry (RESOURCE_EXHAUSTED, ABORTED; wait RetryAfter first). A refused
// key is never retryable.
func (e *Error) Retryable() bool {
	if errors.Is(e, ErrAPIKeyRefused) || errors.Is(e, ErrClientClosed) {
		return false
	}
	switch e.Status {
	case Unavailable, ResourceExhausted, Aborted:
		return e.Processing != MayHaveBeenProcessed
	}
	return false
}

// RetryableIfIdempotent reports whether an idempotent request (the same
// idempotency key, or an RPC idempotent by nature) may be sent again.
func (e *Error) RetryableIfIdempotent() bool {
	if e.Retryable() {
		return true
	}
	if e.Processing != MayHaveBeenProcessed || errors.Is(e, ErrAPIKeyRefused) || errors.Is(e, ErrClientClosed) {
		return false
	}
	switch e.Status {
	case Unavailable, Internal, DeadlineExceeded, Cancelled:
		return true
	}
	return false
}

// localError is an error the client makes without an answer from the server.
func localError(status Status, processing Processing, message string, cause error) *Error {
	return &Error{Status: status, Message: message, Processing: processing, cause: cause}
}

// contextError is the error of a call whose context ended.
func contextError(ctx context.Context, processing Processing, while string) *Error {
	err := ctx.Err()
	status := Cancelled
	what := "cancelled"
	if err == context.DeadlineExceeded {
		status, what = DeadlineExceeded, "deadline exceeded"
	}
	msg := what + " " + while
	if processing == MayHaveBeenProcessed {
		msg += "; the call may have been processed"
	}
	return localError(status, processing, msg, err)
}

// serverError is an ERROR frame's answer. Details that do not decode are
// ignored: a client must tolerate them (section 7), and the status and
// message still say what happened.
func serverError(status uint8, message string, details []byte) *Error {
	e := &Error{Status: Status(status), Message: message, Processing: Answered}
	if len(details) > 0 {
		var d liverelaypb.ErrorDetails
		if unmarshalOptions.Unmarshal(details, &d) == nil {
			e.Reason = d.GetReason()
			e.RetryAfter = time.Duration(d.GetRetryAfterMs()) * time.Millisecond
			for _, v := range d.GetFieldViolations() {
				e.FieldViolations = append(e.FieldViolations, FieldViolation{Field: v.GetField(), Description: v.GetDescription()})
			}
		}
	}
	// UNAVAILABLE means "not processed", except for this one reason.
	if e.Status == Unavailable {
		if e.Reason == ReasonOutcomeUnknown {
			e.Processing = MayHaveBeenProcessed
		} else {
			e.Processing = NotProcessed
		}
	}
	return e
}

// withProcessing is a copy of e with another Processing (a key refusal shared by many calls).
func (e *Error) withProcessing(p Processing) *Error {
	c := *e
	c.Processing = p
	return &c
}
