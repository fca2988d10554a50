package liverelay

import (
	"container/list"
	"context"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/liverelay/liverelay/clients/go/internal/wire"
	"google.golang.org/protobuf/proto"
)

// Client calls one LiveRelay server over a small pool of pipelined
// connections. It is safe for concurrent use; make one per server and API
// key, share it, and Close it when done.
//
// Connections open when the first call needs one (New does no I/O) and come
// back after a loss or a GOAWAY, with back-off. Calls go to the
// least-loaded connection below the server's MAX_REQUESTS_IN_FLIGHT and
// otherwise wait, in arrival order, for room or for a connection.
//
// A failed call is sent again by the client, up to Config.MaxAttempts with
// back-off (at least the server's retry-after), while its context allows:
//   - always when the server certainly did not process it: it was above a
//     GOAWAY's last request id, the server answered UNAVAILABLE (except
//     reason OutcomeUnknown), no connection could be made, or the server
//     refused the connection (TOO_MANY_CONNECTIONS);
//   - for idempotent calls only when its fate is unknown (the connection
//     broke while it was outstanding, UNAVAILABLE OutcomeUnknown):
//     StartActivity, UpdateActivity and EndActivity (always sent with an
//     idempotency key), RegisterToken (idempotent by nature), Ping and the
//     read-only calls.
//
// Calls that ran out of time or were cancelled by their context are never
// sent again, and a refused API key fails every call (ErrAPIKeyRefused,
// ErrAPIKeyRevoked) without new connections.
type Client struct {
	cfg *settings

	calls atomic.Int64 // calls in progress, for MaxPendingCalls
	stats struct {
		connectAttempts, connections, goAways, retries atomic.Uint64
	}

	mu       sync.Mutex
	slots    []slot
	conns    map[*conn]*connState
	waiters  list.List // of *waiter, in arrival order
	attempts uint64    // connection attempts started
	isClosed bool
	// keyErr is final once set: the server refused the API key.
	keyErr *Error
	// welcomed: some connection got WELCOME, so a later refusal of the key is a revocation.
	welcomed bool
	rng      *rand.Rand

	// life ends with Close: connection attempts under way give up.
	life     context.Context
	stopLife context.CancelFunc
	wg       sync.WaitGroup
}

type slotPhase uint8

const (
	slotIdle slotPhase = iota
	slotConnecting
	slotReady
	slotBackingOff
)

type slot struct {
	phase slotPhase
	conn  *conn
	// failures counts attempts in a row that ended before WELCOME; it drives the back-off.
	failures int
	timer    *time.Timer
}

// connState is the pool's view of a connection, under Client.mu.
type connState struct {
	load        int
	limit       int
	established bool
	retired     bool // left its slot (GOAWAY, ids used up): takes no new calls
}

type waiter struct {
	ready chan struct{}
	conn  *conn
	err   *Error
	elem  *list.Element
	// after is the last connection attempt started before the call began to
	// wait: a failure of that one (or an older one) does not fail the call,
	// because it may have started before the server came back.
	after uint64
}

// Stats counts what the client did since New, for monitoring and tests.
type Stats struct {
	// ConnectAttempts counts connections tried; Connections those the
	// server welcomed.
	ConnectAttempts, Connections uint64
	// GoAways counts GOAWAY frames received.
	GoAways uint64
	// Retries counts calls sent again after a failure.
	Retries uint64
}

// New makes a client for cfg. It does no I/O: the first call connects.
func New(cfg Config) (*Client, error) {
	s, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg:   s,
		slots: make([]slot, s.Connections),
		conns: make(map[*conn]*connState),
		rng:   rand.New(rand.NewSource(time.Now().UnixNano())),
	}
	c.waiters.Init()
	c.life, c.stopLife = context.WithCancel(context.Background())
	return c, nil
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	return Stats{
		ConnectAttempts: c.stats.connectAttempts.Load(),
		Connections:     c.stats.connections.Load(),
		GoAways:         c.stats.goAways.Load(),
		Retries:         c.stats.retries.Load(),
	}
}

// Close sends GOAWAY on every connection, lets outstanding calls finish
// for up to Config.CloseTimeout, then closes the connections. Calls made
// after Close fail with ErrClientClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.isClosed {
		c.mu.Unlock()
		c.wg.Wait()
		return nil
	}
	c.isClosed = true
	c.stopLife()
	for i := range c.slots {
		if c.slots[i].timer != nil {
			c.slots[i].timer.Stop()
			c.slots[i].timer = nil
		}
		if c.slots[i].phase == slotBackingOff {
			c.slots[i].phase = slotIdle
		}
	}
	closedErr := localError(Unavailable, NotProcessed, "the client is closed", ErrClientClosed)
	c.failWaitersLocked(closedErr, ^uint64(0))
	conns := make([]*conn, 0, len(c.conns))
	for cn := range c.conns {
		conns = append(conns, cn)
	}
	c.mu.Unlock()

	for _, cn := range conns {
		cn.closeGracefully()
	}
	allDone := make(chan struct{})
	go func() {
		for _, cn := range conns {
			<-cn.done
		}
		close(allDone)
	}()
	timer := time.NewTimer(c.cfg.CloseTimeout)
	defer timer.Stop()
	select {
	case <-allDone:
	case <-timer.C:
		for _, cn := range conns {
			cn.abort(localError(Unavailable, MayHaveBeenProcessed, "the client closed before the reply arrived", ErrClientClosed))
		}
		<-allDone
	}
	c.wg.Wait()
	return nil
}

// invoke runs one call with the retry policy described on Client.
func (c *Client) invoke(ctx context.Context, method string, req, reply proto.Message, idempotent bool) error {
	if n := c.calls.Add(1); n > int64(c.cfg.MaxPendingCalls) {
		c.calls.Add(-1)
		return localError(ResourceExhausted, NotProcessed, fmt.Sprintf("%d calls already pending in the client (Config.MaxPendingCalls)", n-1), nil)
	}
	defer c.calls.Add(-1)
	if c.cfg.DefaultTimeout > 0 {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.cfg.DefaultTimeout)
			defer cancel()
		}
	}
	frame, err := encodeRequest(method, req)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		payload, e := c.attempt(ctx, frame)
		if e == nil {
			if err := unmarshalOptions.Unmarshal(payload, reply); err != nil {
				return localError(Internal, Answered, "cannot decode the reply: "+err.Error(), err)
			}
			return nil
		}
		if attempt >= c.cfg.MaxAttempts || !shouldRetry(e, idempotent) || ctx.Err() != nil {
			return e
		}
		delay := c.backoff(attempt)
		if e.RetryAfter > delay {
			delay = e.RetryAfter
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= delay {
			return e
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return e
		}
		c.stats.retries.Add(1)
		// The frame's request id and timeout are set again by the next connection.
	}
}

var (
	marshalOptions   = proto.MarshalOptions{}
	unmarshalOptions = proto.UnmarshalOptions{DiscardUnknown: false}
)

// encodeRequest builds the REQUEST frame once per call; each attempt fills
// in its request id and timeout.
func encodeRequest(method string, req proto.Message) ([]byte, error) {
	if !wire.ValidMethod(method) {
		return nil, localError(InvalidArgument, NotProcessed, fmt.Sprintf("method %q is not 1 to 255 bytes of printable ASCII", method), nil)
	}
	frame, start := wire.BeginRequest(make([]byte, 0, 64+len(method)), 0, 0, method)
	frame, err := marshalOptions.MarshalAppend(frame, req)
	if err != nil {
		return nil, localError(InvalidArgument, NotProcessed, "cannot encode the request: "+err.Error(), err)
	}
	wire.EndFrame(frame, start)
	return frame, nil
}

func shouldRetry(e *Error, idempotent bool) bool {
	if e.cause == ErrClientClosed || e.cause == ErrAPIKeyRefused || e.cause == ErrAPIKeyRevoked {
		return false
	}
	switch e.Processing {
	case NotProcessed:
		return e.Status == Unavailable
	case MayHaveBeenProcessed:
		return idempotent && (e.Status == Unavailable || e.Status == Internal)
	}
	return false
}

// backoff is the wait before retry n (1-based).
func (c *Client) backoff(n int) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.backoffLocked(n)
}

// attempt sends the call once and waits for its outcome.
func (c *Client) attempt(ctx context.Context, frame []byte) ([]byte, *Error) {
	cn, e := c.acquire(ctx)
	if e != nil {
		return nil, e
	}
	// Each attempt gets its own copy: a previous attempt's frame may still
	// sit in a writer's queue.
	own := make([]byte, len(frame))
	copy(own, frame)
	cl, e := cn.start(ctx, own)
	if e != nil {
		c.release(cn, 1)
		return nil, e
	}
	r := cn.wait(ctx, cl)
	return r.payload, r.err
}

// acquire finds a connection with room for one more call, counting the
// call in its load, or waits for one.
func (c *Client) acquire(ctx context.Context) (*conn, *Error) {
	c.mu.Lock()
	if c.isClosed {
		c.mu.Unlock()
		return nil, localError(Unavailable, NotProcessed, "the client is closed", ErrClientClosed)
	}
	if c.keyErr != nil {
		e := c.keyErr.withProcessing(NotProcessed)
		c.mu.Unlock()
		return nil, e
	}
	if cn := c.leastLoadedLocked(); cn != nil {
		c.conns[cn].load++
		c.mu.Unlock()
		return cn, nil
	}
	w := &waiter{ready: make(chan struct{}, 1), after: c.attempts}
	w.elem = c.waiters.PushBack(w)
	for i := range c.slots {
		if c.slots[i].phase == slotIdle {
			c.connectLocked(i)
		}
	}
	c.mu.Unlock()

	select {
	case <-w.ready:
		return w.conn, w.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if w.elem != nil {
		c.waiters.Remove(w.elem)
		w.elem = nil
		c.mu.Unlock()
		return nil, contextError(ctx, NotProcessed, "while waiting for a connection")
	}
	c.mu.Unlock()
	<-w.ready
	if w.conn != nil {
		c.release(w.conn, 1)
	}
	return nil, contextError(ctx, NotProcessed, "while waiting for a connection")
}

// leastLoadedLocked is the usable connection with the fewest calls among
// those below the server's limit (the default until WELCOME).
func (c *Client) leastLoadedLocked() *conn {
	var best *conn
	bestLoad := 0
	for i := range c.slots {
		s := &c.slots[i]
		if s.phase != slotReady || s.conn == nil {
			continue
		}
		st := c.conns[s.conn]
		if st == nil || st.retired || st.load >= st.limit {
			continue
		}
		if best == nil || st.load < bestLoad {
			best, bestLoad = s.conn, st.load
		}
	}
	return best
}

// dispatchLocked hands waiting calls, in order, to connections with room.
func (c *Client) dispatchLocked() {
	for c.waiters.Len() > 0 {
		cn := c.leastLoadedLocked()
		if cn == nil {
			return
		}
		c.conns[cn].load++
		w := c.waiters.Remove(c.waiters.Front()).(*waiter)
		w.elem = nil
		w.conn = cn
		w.ready <- struct{}{}
	}
}

// failWaitersLocked fails the waiting calls that began to wait before
// attempt `attempt` started.
func (c *Client) failWaitersLocked(e *Error, attempt uint64) {
	for el := c.waiters.Front(); el != nil; {
		next := el.Next()
		w := el.Value.(*waiter)
		if w.after < attempt {
			c.waiters.Remove(el)
			w.elem = nil
			w.err = e
			w.ready <- struct{}{}
		}
		el = next
	}
}

// release frees n calls' room on cn; waiting calls may take it.
func (c *Client) release(cn *conn, n int) {
	c.mu.Lock()
	if st := c.conns[cn]; st != nil {
		st.load -= n
		c.dispatchLocked()
	}
	c.mu.Unlock()
}

func (c *Client) connectLocked(i int) {
	c.attempts++
	attempt := c.attempts
	c.slots[i].phase = slotConnecting
	c.slots[i].conn = nil
	c.stats.connectAttempts.Add(1)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.connect(i, attempt)
	}()
}

func (c *Client) connect(i int, attempt uint64) {
	ctx, cancel := context.WithTimeout(c.life, c.cfg.ConnectTimeout)
	nc, err := dial(ctx, c.cfg)
	cancel()
	c.mu.Lock()
	if err != nil {
		e := localError(Unavailable, NotProcessed, fmt.Sprintf("cannot connect to %s: %v", c.cfg.Address, err), err)
		c.attemptFailedLocked(i, attempt, e)
		c.mu.Unlock()
		return
	}
	if c.isClosed {
		c.slots[i].phase = slotIdle
		c.mu.Unlock()
		_ = nc.Close()
		return
	}
	cn := newConn(c, i, attempt, nc)
	c.conns[cn] = &connState{limit: wire.DefaultMaxRequestsInFlight}
	c.slots[i].phase = slotReady
	c.slots[i].conn = cn
	c.dispatchLocked()
	c.mu.Unlock()
	cn.run()
}

// attemptFailedLocked: connection attempt `attempt` of slot i ended before
// WELCOME. When no other connection is usable or coming, the calls that
// waited for it fail now with its error rather than at their deadline (and
// are retried by their own policy); the slot tries again after a back-off
// while calls wait.
func (c *Client) attemptFailedLocked(i int, attempt uint64, e *Error) {
	s := &c.slots[i]
	s.failures++
	s.conn = nil
	if c.isClosed || c.keyErr != nil {
		s.phase = slotIdle
		return
	}
	if !c.anyUsableOrConnectingLocked(i) {
		c.failWaitersLocked(e, attempt)
	}
	if c.waiters.Len() == 0 {
		s.phase = slotIdle
		return
	}
	c.scheduleReconnectLocked(i)
}

func (c *Client) scheduleReconnectLocked(i int) {
	s := &c.slots[i]
	s.phase = slotBackingOff
	delay := c.backoffLocked(s.failures)
	s.timer = time.AfterFunc(delay, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.slots[i].phase != slotBackingOff || c.isClosed {
			return
		}
		c.slots[i].timer = nil
		c.connectLocked(i)
	})
}

// backoffLocked is the wait before retry or reconnect n (1-based): capped
// exponential, shortened by up to half at random.
func (c *Client) backoffLocked(n int) time.Duration {
	d := c.cfg.BackoffInitial
	for i := 1; i < n && d < c.cfg.BackoffMax; i++ {
		d *= 2
	}
	if d > c.cfg.BackoffMax {
		d = c.cfg.BackoffMax
	}
	return d - time.Duration(c.rng.Float64()*0.5*float64(d))
}

func (c *Client) anyUsableOrConnectingLocked(except int) bool {
	for j := range c.slots {
		if j == except {
			continue
		}
		switch c.slots[j].phase {
		case slotConnecting:
			return true
		case slotReady:
			if st := c.conns[c.slots[j].conn]; st != nil && !st.retired {
				return true
			}
		}
	}
	return false
}

// established: WELCOME arrived; the server accepted the key.
func (c *Client) established(cn *conn, limit int) {
	c.stats.connections.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.welcomed = true
	st := c.conns[cn]
	if st == nil {
		return
	}
	st.established = true
	if limit < 1 {
		limit = 1
	}
	st.limit = limit
	if !st.retired && c.slots[cn.slot].conn == cn {
		c.slots[cn.slot].failures = 0
	}
	c.dispatchLocked()
}

// goAwayError is what the calls a GOAWAY left unprocessed fail with.
func (c *Client) goAwayError(g wire.GoAwayFields, welcomed bool) *Error {
	msg := fmt.Sprintf("the server sent GOAWAY %s (%s); the call was not processed", g.Code, g.Reason)
	switch g.Code {
	case wire.TooManyConnections:
		e := localError(Unavailable, NotProcessed, msg, ErrTooManyConnections)
		e.Reason = ReasonTooManyConnections
		return e
	case wire.Unauthenticated:
		c.mu.Lock()
		revoked := welcomed || c.welcomed
		c.mu.Unlock()
		cause, reason := ErrAPIKeyRefused, ReasonAPIKeyRefused
		if revoked {
			cause, reason = ErrAPIKeyRevoked, ReasonAPIKeyRevoked
		}
		e := localError(Unauthenticated, NotProcessed, fmt.Sprintf("the server refused the API key (%s); the call was not processed", g.Reason), cause)
		e.Reason = reason
		return e
	}
	return localError(Unavailable, NotProcessed, msg, nil)
}

// goingAway: the server's first GOAWAY on cn. The connection takes no new
// calls and its slot gets a new one: at once after a working connection,
// after a back-off when the server refused this one before WELCOME
// (TOO_MANY_CONNECTIONS, shutting down), never after an API key refusal,
// and not until a call needs it after an idle timeout.
func (c *Client) goingAway(cn *conn, g wire.GoAwayFields, welcomed bool, failure *Error) {
	c.stats.goAways.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.conns[cn]
	if st == nil {
		return
	}
	st.retired = true
	if g.Code == wire.Unauthenticated && c.keyErr == nil {
		c.keyErr = failure
		c.failWaitersLocked(failure, ^uint64(0))
	}
	i := cn.slot
	if c.slots[i].conn != cn {
		return
	}
	c.slots[i].conn = nil
	if !welcomed {
		c.attemptFailedLocked(i, cn.attempt, failure)
		return
	}
	if c.isClosed || c.keyErr != nil || (g.Code == wire.IdleTimeout && c.waiters.Len() == 0) {
		c.slots[i].phase = slotIdle
		return
	}
	c.connectLocked(i)
}

// retire takes cn out of its slot (its request ids are used up) and opens another.
func (c *Client) retire(cn *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.conns[cn]
	if st == nil || st.retired {
		return
	}
	st.retired = true
	if i := cn.slot; c.slots[i].conn == cn && !c.isClosed {
		c.slots[i].conn = nil
		c.connectLocked(i)
	}
}

// closed: cn's socket is closed and its calls have their results.
func (c *Client) closed(cn *conn, welcomed bool, failure *Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.conns[cn]
	delete(c.conns, cn)
	if st == nil || st.retired {
		return
	}
	i := cn.slot
	if c.slots[i].conn != cn {
		return
	}
	c.slots[i].conn = nil
	if !welcomed {
		e := localError(Unavailable, NotProcessed, fmt.Sprintf("cannot connect to %s: the connection closed before WELCOME", c.cfg.Address), failure.cause)
		c.attemptFailedLocked(i, cn.attempt, e)
		return
	}
	if c.isClosed || c.keyErr != nil || c.waiters.Len() == 0 {
		c.slots[i].phase = slotIdle
		return
	}
	c.connectLocked(i)
}
