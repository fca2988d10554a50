package liverelay

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/liverelay/liverelay/clients/go/internal/wire"
)

// conn is one connection of the pool: the protocol's client side for one
// socket. Calls are pipelined on it with request ids 1, 2, 3, ...; a reader
// goroutine matches replies to calls, a writer goroutine batches frames into
// the socket, and a keepalive goroutine pings while calls are outstanding.
//
// Its fields under mu are its protocol state. The pool's view of it (load,
// limit, whether it takes new calls) is in the Client, under the Client's
// lock; the two locks are never held together.
type conn struct {
	client *Client
	slot   int
	// attempt is the pool's number of the connection attempt that made it.
	attempt uint64
	nc      net.Conn

	// lastActivity is when a frame last arrived or the first call of a busy
	// spell was sent (UnixNano), for the keepalive.
	lastActivity atomic.Int64

	mu      sync.Mutex
	nextID  uint32
	pending map[uint32]*call
	outq    [][]byte
	// welcomed: WELCOME arrived; server holds its settings from then on.
	welcomed bool
	server   wire.ServerSettings
	// goAway is the server's GOAWAY, once one arrived, and goAwayErr what
	// the calls it left unprocessed fail with.
	goAway    *wire.GoAwayFields
	goAwayErr *Error
	// closeErr is what the outstanding calls failed with when it closed.
	closeErr *Error
	// sentGoAway: the client's own GOAWAY is queued; no REQUEST may follow it.
	sentGoAway bool
	// closeAfterFlush: the writer closes the socket once what is queued is written.
	closeAfterFlush bool
	// abortErr is what outstanding calls fail with when the client ended the connection.
	abortErr      *Error
	closed        bool
	drainedClosed bool
	pingOut       bool
	pingData      [wire.PingSize]byte
	pingDue       time.Time

	wake      chan struct{} // the writer has frames to write
	welcomeCh chan struct{} // closed at WELCOME or at close
	drained   chan struct{} // closed when a GOAWAY was exchanged and nothing is outstanding
	done      chan struct{} // closed once the connection is over and every call has its result
}

// testHookWrite, when a test sets it, sees every frame before it is written.
var testHookWrite atomic.Pointer[func(cn *conn, frame []byte)]

// call is one request on a connection, from its REQUEST to its reply.
type call struct {
	id   uint32
	done chan result
	// abandoned: the caller gave up (deadline, cancel) and CANCEL went out;
	// the id stays taken until the server's reply, which is dropped.
	abandoned bool
}

type result struct {
	payload []byte
	err     *Error
}

func newConn(c *Client, slot int, attempt uint64, nc net.Conn) *conn {
	cn := &conn{
		client:    c,
		slot:      slot,
		attempt:   attempt,
		nc:        nc,
		nextID:    1,
		pending:   make(map[uint32]*call),
		server:    wire.DefaultServerSettings(),
		wake:      make(chan struct{}, 1),
		welcomeCh: make(chan struct{}),
		drained:   make(chan struct{}),
		done:      make(chan struct{}),
	}
	cn.lastActivity.Store(time.Now().UnixNano())
	return cn
}

// run starts the connection's goroutines; the preface and HELLO are already written.
func (cn *conn) run() {
	c := cn.client
	c.wg.Add(2)
	go func() { defer c.wg.Done(); cn.writeLoop() }()
	go func() { defer c.wg.Done(); cn.readLoop() }()
	if c.cfg.KeepaliveInterval > 0 {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); cn.keepaliveLoop() }()
	}
}

func (cn *conn) kick() {
	select {
	case cn.wake <- struct{}{}:
	default:
	}
}

// enqueueLocked queues a frame for the writer; the caller kicks it after unlocking.
func (cn *conn) enqueueLocked(frame []byte) {
	cn.outq = append(cn.outq, frame)
}

// start sends one REQUEST. frame is the whole frame with request id 0, to
// be filled in here: ids must reach the socket in increasing order, so the
// id is taken and the frame queued under one lock.
func (cn *conn) start(ctx context.Context, frame []byte) (*call, *Error) {
	payloadSize := len(frame) - wire.HeaderSize
	cn.mu.Lock()
	// A server that advertises a MAX_FRAME_SIZE below the default could
	// refuse a large REQUEST sent before WELCOME (section 4): wait for it.
	for !cn.welcomed && payloadSize > wire.SafeBeforeWelcome && !cn.closed {
		cn.mu.Unlock()
		select {
		case <-cn.welcomeCh:
		case <-ctx.Done():
			return nil, contextError(ctx, NotProcessed, "while waiting for the server's WELCOME")
		}
		cn.mu.Lock()
	}
	if cn.closed || cn.goAway != nil || cn.sentGoAway {
		e := cn.unusableLocked()
		cn.mu.Unlock()
		return nil, e
	}
	if payloadSize > int(cn.server.MaxFrameSize) {
		limit := cn.server.MaxFrameSize
		cn.mu.Unlock()
		return nil, localError(InvalidArgument, NotProcessed,
			fmt.Sprintf("the request of %d bytes is above the server's MAX_FRAME_SIZE of %d bytes", payloadSize, limit), nil)
	}
	if cn.nextID == 0 {
		// Every id of the connection is used (2^32-1 calls): a new one takes over.
		cn.mu.Unlock()
		cn.client.retire(cn)
		cn.closeGracefully()
		return nil, localError(Unavailable, NotProcessed, "the connection used up its request ids; the call was not sent", nil)
	}
	// Deadline check at the last moment: the timeout sent is what is left of it.
	timeoutMS, expired := timeoutFor(ctx)
	if expired {
		cn.mu.Unlock()
		return nil, contextError(ctx, NotProcessed, "before the call was sent")
	}
	id := cn.nextID
	cn.nextID++ // wraps to 0 after the last id, which the check above catches
	binary.BigEndian.PutUint32(frame[6:10], id)
	binary.BigEndian.PutUint32(frame[wire.HeaderSize:wire.HeaderSize+4], timeoutMS)
	cl := &call{id: id, done: make(chan result, 1)}
	if len(cn.pending) == 0 {
		cn.lastActivity.Store(time.Now().UnixNano())
	}
	cn.pending[id] = cl
	cn.enqueueLocked(frame)
	cn.mu.Unlock()
	cn.kick()
	return cl, nil
}

// unusableLocked is the error of a call that found the connection going
// away before it could be sent: why it went away (a GOAWAY
// TOO_MANY_CONNECTIONS, a refused key, a TLS alert), and that the call was
// not sent.
func (cn *conn) unusableLocked() *Error {
	switch {
	case cn.goAwayErr != nil:
		return cn.goAwayErr
	case cn.closeErr != nil:
		e := *cn.closeErr
		e.Processing = NotProcessed
		e.Message = "the connection closed before the call was sent"
		if cn.closeErr.cause != nil && !errors.Is(cn.closeErr.cause, net.ErrClosed) && cn.closeErr.cause != io.EOF {
			e.Message += " (" + cn.closeErr.cause.Error() + ")"
		}
		return &e
	}
	return localError(Unavailable, NotProcessed, "the connection is closing; the call was not sent", nil)
}

// timeoutFor is the REQUEST's timeout_ms for the context's deadline: what
// is left of it, rounded up so the server's deadline is never before the
// client's (0 would mean none). expired: nothing is left.
func timeoutFor(ctx context.Context) (uint32, bool) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	left := time.Until(deadline)
	if left <= 0 {
		return 0, true
	}
	ms := (left + time.Millisecond - 1) / time.Millisecond
	if ms > wire.MaxRequestID {
		ms = wire.MaxRequestID
	}
	return uint32(ms), false
}

// wait waits for the call's reply. When the context ends first the call is
// abandoned: CANCEL goes out, the call fails with the context's error at
// once, and the id stays taken until the server's reply arrives.
func (cn *conn) wait(ctx context.Context, cl *call) result {
	select {
	case r := <-cl.done:
		return r
	case <-ctx.Done():
	}
	cn.mu.Lock()
	if _, outstanding := cn.pending[cl.id]; outstanding && !cl.abandoned {
		cl.abandoned = true
		if !cn.closed && !cn.closeAfterFlush {
			cn.enqueueLocked(wire.AppendCancel(nil, cl.id))
		}
		cn.mu.Unlock()
		cn.kick()
		return result{err: contextError(ctx, MayHaveBeenProcessed, "while waiting for the reply; CANCEL sent")}
	}
	cn.mu.Unlock()
	// The reply (or the connection's failure) was handed over meanwhile.
	return <-cl.done
}

func (cn *conn) writeLoop() {
	bw := bufio.NewWriterSize(cn.nc, 64<<10)
	var batch [][]byte
	var deadlineSetAt time.Time
	for {
		select {
		case <-cn.wake:
		case <-cn.done:
		}
		// The callers woken by the last replies are about to queue their next
		// frames: letting them run first makes one write carry them all, which
		// costs this process and the server far fewer syscalls per call.
		runtime.Gosched()
		cn.mu.Lock()
		batch, cn.outq = cn.outq, batch[:0]
		closing, over := cn.closeAfterFlush, cn.closed
		cn.mu.Unlock()
		if len(batch) > 0 {
			// Bounded: a peer that stops reading must not hold the writer (or
			// a final GOAWAY) forever. The deadline moves on once a quarter of
			// it has passed, not per write: a write may fail after 3/4 of
			// WriteTimeout without progress, never later than WriteTimeout.
			if now := time.Now(); now.Sub(deadlineSetAt) >= cn.client.cfg.WriteTimeout/4 {
				_ = cn.nc.SetWriteDeadline(now.Add(cn.client.cfg.WriteTimeout))
				deadlineSetAt = now
			}
			var err error
			for i, f := range batch {
				if err == nil {
					if hook := testHookWrite.Load(); hook != nil {
						(*hook)(cn, f)
					}
					_, err = bw.Write(f)
				}
				batch[i] = nil
			}
			if err == nil {
				err = bw.Flush()
			}
			if err != nil {
				// The reader sees the closed socket and fails what is outstanding.
				cn.abort(localError(Unavailable, MayHaveBeenProcessed, "cannot write to the connection: "+err.Error(), err))
				return
			}
		}
		if closing {
			_ = cn.nc.Close()
			return
		}
		if over {
			return
		}
	}
}

// abort ends the connection at once: outstanding calls fail with err.
func (cn *conn) abort(err *Error) {
	cn.mu.Lock()
	if cn.abortErr == nil {
		cn.abortErr = err
	}
	cn.mu.Unlock()
	_ = cn.nc.Close()
}

// violation: the server broke the protocol. GOAWAY with the violation's code
// (last_request_id 0: a client answers no requests), outstanding calls fail
// INTERNAL "may have been processed", and the socket closes once the GOAWAY
// is written (section 5).
func (cn *conn) violation(v *wire.Violation) {
	cn.mu.Lock()
	if cn.abortErr == nil {
		cn.abortErr = localError(Internal, MayHaveBeenProcessed, "the server broke the protocol: "+v.Reason, v)
	}
	if !cn.closed && !cn.closeAfterFlush {
		cn.enqueueLocked(wire.AppendGoAway(nil, wire.GoAwayFields{Code: v.Code, Reason: v.Reason}))
		cn.closeAfterFlush = true
	}
	cn.mu.Unlock()
	cn.kick()
}

func (cn *conn) readLoop() {
	br := bufio.NewReaderSize(cn.nc, 64<<10)
	maxFrame := cn.client.cfg.MaxFrameSize
	var err error
	for {
		var f wire.Frame
		f, err = wire.ReadFrame(br, maxFrame)
		if err != nil {
			break
		}
		cn.lastActivity.Store(time.Now().UnixNano())
		if err = cn.handle(f); err != nil {
			break
		}
	}
	var v *wire.Violation
	if errors.As(err, &v) {
		cn.violation(v)
	}
	cn.teardown(err)
}

// handle acts on one frame from the server; an error ends the connection.
func (cn *conn) handle(f wire.Frame) error {
	cn.mu.Lock()
	welcomed := cn.welcomed
	cn.mu.Unlock()
	if !welcomed && f.Type != wire.Welcome && f.Type != wire.GoAway && f.Type != wire.Ping {
		return &wire.Violation{Code: wire.ProtocolError, Reason: fmt.Sprintf("%s frame before WELCOME", f.Type)}
	}
	switch f.Type {
	case wire.Response:
		return cn.reply(f.RequestID, result{payload: f.Payload})
	case wire.Error:
		e, err := wire.ParseError(f.Payload)
		if err != nil {
			return err
		}
		return cn.reply(f.RequestID, result{err: serverError(e.Status, e.Message, e.Details)})
	case wire.Welcome:
		return cn.welcome(f.Payload)
	case wire.GoAway:
		g, err := wire.ParseGoAway(f.Payload)
		if err != nil {
			return err
		}
		return cn.goAwayReceived(g)
	case wire.Ping:
		data, err := wire.ParsePing(f.Type, f.Payload)
		if err != nil {
			return err
		}
		cn.mu.Lock()
		if !cn.closeAfterFlush {
			cn.enqueueLocked(wire.AppendPong(nil, data))
		}
		cn.mu.Unlock()
		cn.kick()
	case wire.Pong:
		data, err := wire.ParsePing(f.Type, f.Payload)
		if err != nil {
			return err
		}
		cn.mu.Lock()
		if cn.pingOut && data == cn.pingData {
			cn.pingOut = false
		}
		cn.mu.Unlock()
	default:
		return &wire.Violation{Code: wire.ProtocolError, Reason: fmt.Sprintf("unexpected %s frame", f.Type)}
	}
	return nil
}

func (cn *conn) reply(id uint32, r result) error {
	cn.mu.Lock()
	cl, ok := cn.pending[id]
	if !ok {
		cn.mu.Unlock()
		return &wire.Violation{Code: wire.ProtocolError, Reason: fmt.Sprintf("reply for request id %d, which is not outstanding", id)}
	}
	delete(cn.pending, id)
	abandoned := cl.abandoned
	drained := cn.checkDrainedLocked()
	cn.mu.Unlock()
	cn.client.release(cn, 1)
	if !abandoned {
		cl.done <- r
	}
	if drained {
		cn.drainedAfterGoAway()
	}
	return nil
}

func (cn *conn) welcome(p []byte) error {
	w, s, err := wire.ParseWelcome(p)
	if err != nil {
		return err
	}
	if w.Version != wire.Version {
		return &wire.Violation{Code: wire.UnsupportedVersion, Reason: fmt.Sprintf("WELCOME chose version %d; this client speaks %d", w.Version, wire.Version)}
	}
	cn.mu.Lock()
	if cn.welcomed {
		cn.mu.Unlock()
		return &wire.Violation{Code: wire.ProtocolError, Reason: "second WELCOME frame"}
	}
	cn.welcomed = true
	cn.server = s
	close(cn.welcomeCh)
	cn.mu.Unlock()
	cn.client.established(cn, int(s.MaxRequestsInFlight))
	return nil
}

// goAwayReceived: no new calls go to this connection; calls above the last
// request id were not processed and fail so (the client sends them again
// elsewhere); the others are answered before the server closes.
func (cn *conn) goAwayReceived(g wire.GoAwayFields) error {
	cn.mu.Lock()
	welcomed := cn.welcomed
	cn.mu.Unlock()
	failure := cn.client.goAwayError(g, welcomed)
	cn.mu.Lock()
	if cn.goAway != nil && g.LastRequestID > cn.goAway.LastRequestID {
		cn.mu.Unlock()
		return &wire.Violation{Code: wire.ProtocolError, Reason: "GOAWAY last_request_id increased"}
	}
	first := cn.goAway == nil
	cn.goAway = &g
	cn.goAwayErr = failure
	var unprocessed []*call
	for id, cl := range cn.pending {
		if id > g.LastRequestID {
			delete(cn.pending, id)
			unprocessed = append(unprocessed, cl)
		}
	}
	drained := cn.checkDrainedLocked()
	cn.mu.Unlock()
	if first {
		cn.client.goingAway(cn, g, welcomed, failure)
	}
	if len(unprocessed) > 0 {
		cn.client.release(cn, len(unprocessed))
		for _, cl := range unprocessed {
			if !cl.abandoned {
				cl.done <- result{err: failure}
			}
		}
	}
	if drained {
		cn.drainedAfterGoAway()
	}
	return nil
}

// checkDrainedLocked reports (once) that a GOAWAY was exchanged and nothing is outstanding.
func (cn *conn) checkDrainedLocked() bool {
	if cn.drainedClosed || len(cn.pending) > 0 || (cn.goAway == nil && !cn.sentGoAway) {
		return false
	}
	cn.drainedClosed = true
	close(cn.drained)
	return true
}

// drainedAfterGoAway: after the server's GOAWAY, with nothing outstanding,
// the connection has no use left; the server closes it too.
func (cn *conn) drainedAfterGoAway() {
	cn.mu.Lock()
	serverSide := cn.goAway != nil
	if serverSide && !cn.closeAfterFlush {
		cn.closeAfterFlush = true
	}
	cn.mu.Unlock()
	if serverSide {
		cn.kick()
	}
}

// closeGracefully sends the client's GOAWAY NO_ERROR; the connection closes
// once its outstanding replies have arrived (or when shut is called).
func (cn *conn) closeGracefully() {
	cn.mu.Lock()
	if cn.closed || cn.sentGoAway || cn.closeAfterFlush {
		cn.mu.Unlock()
		return
	}
	cn.sentGoAway = true
	cn.enqueueLocked(wire.AppendGoAway(nil, wire.GoAwayFields{Code: wire.NoError, Reason: "client closing"}))
	drained := cn.checkDrainedLocked()
	if drained {
		cn.closeAfterFlush = true
	}
	cn.mu.Unlock()
	cn.kick()
	if !drained {
		cn.client.wg.Add(1)
		go func() {
			defer cn.client.wg.Done()
			select {
			case <-cn.drained:
				cn.flushAndClose()
			case <-cn.done:
			}
		}()
	}
}

// flushAndClose closes the socket once what is queued is written.
func (cn *conn) flushAndClose() {
	cn.mu.Lock()
	cn.closeAfterFlush = true
	cn.mu.Unlock()
	cn.kick()
}

// teardown runs once the reader stops: every outstanding call gets its
// result, and the pool forgets the connection.
func (cn *conn) teardown(readErr error) {
	cn.mu.Lock()
	if cn.closed {
		cn.mu.Unlock()
		return
	}
	cn.closed = true
	failure := cn.abortErr
	if failure == nil {
		failure = cn.closedError(readErr)
	}
	cn.closeErr = failure
	outstanding := cn.pending
	cn.pending = nil
	if !cn.welcomed {
		close(cn.welcomeCh)
	}
	welcomed := cn.welcomed
	writerCloses := cn.closeAfterFlush
	cn.mu.Unlock()
	if !writerCloses {
		_ = cn.nc.Close()
	}
	// The pool first, so that no call is handed to this connection any more
	// and the retries of the calls failed below find its successor.
	cn.client.closed(cn, welcomed, failure)
	for _, cl := range outstanding {
		if !cl.abandoned {
			cl.done <- result{err: failure}
		}
	}
	close(cn.done)
}

// closedError is what outstanding calls fail with when the socket closed
// under them: they may have been processed (section 9).
func (cn *conn) closedError(readErr error) *Error {
	what := "the connection closed while the call was outstanding"
	if !cn.welcomed {
		what = "the connection closed before the server's WELCOME"
	}
	switch {
	case readErr == nil || readErr == io.EOF || errors.Is(readErr, net.ErrClosed):
	default:
		what += " (" + readErr.Error() + ")"
	}
	return localError(Unavailable, MayHaveBeenProcessed, what+"; the call may have been processed", readErr)
}

func (cn *conn) keepaliveLoop() {
	interval := cn.client.cfg.KeepaliveInterval
	timeout := cn.client.cfg.KeepaliveTimeout
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-cn.done:
			return
		case <-timer.C:
		}
		now := time.Now()
		var next time.Duration
		dead := false
		send := false
		cn.mu.Lock()
		last := time.Unix(0, cn.lastActivity.Load())
		switch {
		case cn.pingOut && !now.Before(cn.pingDue):
			dead = true
		case cn.pingOut:
			next = cn.pingDue.Sub(now)
		case len(cn.pending) > 0 && now.Sub(last) >= interval && !cn.closeAfterFlush:
			if _, err := rand.Read(cn.pingData[:]); err != nil {
				binary.BigEndian.PutUint64(cn.pingData[:], uint64(now.UnixNano()))
			}
			cn.pingOut = true
			cn.pingDue = now.Add(timeout)
			cn.enqueueLocked(wire.AppendPing(nil, cn.pingData))
			send = true
			next = timeout
		default:
			next = interval - now.Sub(last)
			if next <= 0 {
				next = interval
			}
		}
		cn.mu.Unlock()
		if send {
			cn.kick()
		}
		if dead {
			cn.abort(localError(Unavailable, MayHaveBeenProcessed,
				fmt.Sprintf("no PONG within %v: the connection is dead; the call may have been processed", timeout), nil))
			return
		}
		timer.Reset(next)
	}
}

// dial opens a connection: TCP, TLS, then the preface and HELLO. Calls may
// go out right after it (0-RTT): the server holds them until it has
// checked the key.
func dial(ctx context.Context, cfg *settings) (net.Conn, error) {
	nc, err := cfg.DialContext(ctx, "tcp", cfg.Address)
	if err != nil {
		return nil, err
	}
	if cfg.tls != nil {
		tc := tls.Client(nc, cfg.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, err
		}
		nc = tc
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = nc.SetWriteDeadline(deadline)
	}
	if _, err := nc.Write(cfg.hello); err != nil {
		_ = nc.Close()
		return nil, err
	}
	_ = nc.SetWriteDeadline(time.Time{})
	return nc, nil
}
