package liverelay

// Tests of the client's protocol logic against a scripted server on
// in-memory connections (net.Pipe): each test plays the server's side frame
// by frame, so races the real server makes rare (a reply for an unknown id,
// OutcomeUnknown, a refusal before WELCOME, a silent peer) happen on cue.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/liverelay/liverelay/clients/go/adminpb"
	"github.com/liverelay/liverelay/clients/go/internal/wire"
	pb "github.com/liverelay/liverelay/clients/go/liverelaypb"
	"google.golang.org/protobuf/proto"
)

// scripted is the server side of a fake: every connection the client dials.
type scripted struct {
	t     *testing.T
	conns chan *peer
}

// peer is one connection, seen from the server.
type peer struct {
	t      *testing.T
	nc     net.Conn
	frames chan wire.Frame
	hello  []byte
}

func newScripted(t *testing.T) *scripted {
	return &scripted{t: t, conns: make(chan *peer, 8)}
}

// client makes a plaintext client whose connections reach s.
func (s *scripted) client(cfg Config) *Client {
	s.t.Helper()
	cfg.Address = "fake.test:7443"
	cfg.Plaintext = true
	if cfg.APIKey == "" {
		cfg.APIKey = "lrk_fake"
	}
	if cfg.Connections == 0 {
		cfg.Connections = 1
	}
	if cfg.BackoffInitial == 0 {
		cfg.BackoffInitial = time.Millisecond
		cfg.BackoffMax = 5 * time.Millisecond
	}
	cfg.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		client, server := net.Pipe()
		p := &peer{t: s.t, nc: server, frames: make(chan wire.Frame, 64)}
		go p.read()
		s.conns <- p
		return client, nil
	}
	c, err := New(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// accept waits for the client's next connection.
func (s *scripted) accept() *peer {
	s.t.Helper()
	select {
	case p := <-s.conns:
		s.t.Cleanup(func() { _ = p.nc.Close() })
		return p
	case <-time.After(10 * time.Second):
		s.t.Fatal("the client opened no connection")
		return nil
	}
}

// read reads the preface and HELLO, then client frames, until the pipe closes.
func (p *peer) read() {
	defer close(p.frames)
	br := bufio.NewReader(p.nc)
	var magic [8]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil || magic != wire.Magic {
		return
	}
	for {
		var hb [wire.HeaderSize]byte
		if _, err := io.ReadFull(br, hb[:]); err != nil {
			return
		}
		h := wire.ParseHeader(hb[:])
		payload := make([]byte, h.Length)
		if _, err := io.ReadFull(br, payload); err != nil {
			return
		}
		p.frames <- wire.Frame{Header: h, Payload: payload}
	}
}

// next is the client's next frame; PONGs and PINGs are returned like any other.
func (p *peer) next() wire.Frame {
	p.t.Helper()
	select {
	case f, ok := <-p.frames:
		if !ok {
			p.t.Fatal("the client closed the connection")
		}
		return f
	case <-time.After(10 * time.Second):
		p.t.Fatal("no frame from the client")
		return wire.Frame{}
	}
}

// expectClosed waits until the client closes the connection, returning the frames it sent before.
func (p *peer) expectClosed() []wire.Frame {
	p.t.Helper()
	var got []wire.Frame
	for {
		select {
		case f, ok := <-p.frames:
			if !ok {
				return got
			}
			got = append(got, f)
		case <-time.After(10 * time.Second):
			p.t.Fatal("the client did not close the connection")
		}
	}
}

func (p *peer) send(b []byte) {
	p.t.Helper()
	if _, err := p.nc.Write(b); err != nil {
		p.t.Fatalf("server write: %v", err)
	}
}

// handshake reads HELLO and answers WELCOME with the given settings.
func (p *peer) handshake(settings ...wire.SettingPair) {
	p.t.Helper()
	if f := p.next(); f.Type != wire.Hello {
		p.t.Fatalf("first frame %s, want HELLO", f.Type)
	}
	p.send(wire.AppendWelcome(nil, wire.WelcomeFields{Version: 1, Settings: settings}))
}

// request reads the next frame, which must be a REQUEST for method.
func (p *peer) request(method string) (uint32, wire.RequestFields) {
	p.t.Helper()
	f := p.next()
	if f.Type != wire.Request {
		p.t.Fatalf("frame %s, want REQUEST %s", f.Type, method)
	}
	r, err := wire.ParseRequest(f.Payload)
	if err != nil {
		p.t.Fatal(err)
	}
	if r.Method != method {
		p.t.Fatalf("REQUEST %s, want %s", r.Method, method)
	}
	return f.RequestID, r
}

func (p *peer) respond(id uint32, m proto.Message) {
	p.t.Helper()
	b, start := wire.BeginFrame(nil, wire.Response, id)
	b, err := proto.MarshalOptions{}.MarshalAppend(b, m)
	if err != nil {
		p.t.Fatal(err)
	}
	wire.EndFrame(b, start)
	p.send(b)
}

func (p *peer) fail(id uint32, status Status, message string, details *pb.ErrorDetails) {
	p.t.Helper()
	var d []byte
	if details != nil {
		var err error
		if d, err = proto.Marshal(details); err != nil {
			p.t.Fatal(err)
		}
	}
	p.send(wire.AppendError(nil, id, wire.ErrorFields{Status: uint8(status), Message: message, Details: d}))
}

type outcome[T any] struct {
	reply T
	err   error
}

// async runs f in a goroutine; its outcome arrives on the channel.
func async[T any](f func() (T, error)) chan outcome[T] {
	ch := make(chan outcome[T], 1)
	go func() {
		r, err := f()
		ch <- outcome[T]{r, err}
	}()
	return ch
}

func await[T any](t *testing.T, ch chan outcome[T]) (T, error) {
	t.Helper()
	select {
	case o := <-ch:
		return o.reply, o.err
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not finish")
		var zero T
		return zero, nil
	}
}

func asError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *liverelay.Error", err, err)
	}
	return e
}

func startRequest(activity string) *pb.StartActivityRequest {
	return &pb.StartActivityRequest{
		AppId: proto.String("dev.app"), ActivityId: proto.String(activity), AttributesType: proto.String("T"),
		AttributesJson: proto.String("{}"), ContentStateJson: proto.String("{}"),
		Targets: &pb.Targets{AllDevices: proto.Bool(true)},
	}
}

func TestScriptedOutcomeUnknownIsResentWithTheSameKey(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{})
	req := startRequest("a-1")
	done := async(func() (*pb.StartActivityReply, error) { return c.StartActivity(context.Background(), req) })
	p := s.accept()
	p.handshake()
	id, r := p.request(MethodStartActivity)
	var first pb.StartActivityRequest
	if err := proto.Unmarshal(r.Message, &first); err != nil {
		t.Fatal(err)
	}
	if first.GetIdempotencyKey() == "" {
		t.Fatal("StartActivity went out without an idempotency key")
	}
	p.fail(id, Unavailable, "commit got no answer", &pb.ErrorDetails{Reason: ReasonOutcomeUnknown})
	id2, r2 := p.request(MethodStartActivity)
	var second pb.StartActivityRequest
	if err := proto.Unmarshal(r2.Message, &second); err != nil {
		t.Fatal(err)
	}
	if id2 <= id || second.GetIdempotencyKey() != first.GetIdempotencyKey() {
		t.Fatalf("resent as id %d (after %d) with key %q, want the first key %q", id2, id, second.GetIdempotencyKey(), first.GetIdempotencyKey())
	}
	p.respond(id2, &pb.StartActivityReply{ActivityId: "a-1", Replayed: true})
	reply, err := await(t, done)
	if err != nil {
		t.Fatal(err)
	}
	if !reply.GetReplayed() || req.GetIdempotencyKey() != first.GetIdempotencyKey() {
		t.Fatalf("reply %v, request key %q", reply, req.GetIdempotencyKey())
	}
	if st := c.Stats(); st.Retries != 1 || st.ConnectAttempts != 1 {
		t.Fatalf("stats %+v, want one retry on one connection", st)
	}
}

func TestScriptedOutcomeUnknownIsNotResentForCreateChannel(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{})
	done := async(func() (*pb.CreateChannelReply, error) {
		return c.CreateChannel(context.Background(), &pb.CreateChannelRequest{AppId: "dev.app"})
	})
	p := s.accept()
	p.handshake()
	id, _ := p.request(MethodCreateChannel)
	p.fail(id, Unavailable, "unreadable answer", &pb.ErrorDetails{Reason: ReasonOutcomeUnknown, RetryAfterMs: 5})
	_, err := await(t, done)
	e := asError(t, err)
	if e.Status != Unavailable || e.Processing != MayHaveBeenProcessed || e.Reason != ReasonOutcomeUnknown || e.RetryAfter != 5*time.Millisecond {
		t.Fatalf("got %+v", e)
	}
	if e.Retryable() || !e.RetryableIfIdempotent() {
		t.Fatalf("Retryable %v RetryableIfIdempotent %v", e.Retryable(), e.RetryableIfIdempotent())
	}
	// The next frame is a new call's, not a resent CreateChannel.
	ping := async(func() (*pb.PingReply, error) {
		return c.Ping(context.Background(), &pb.PingRequest{Payload: []byte("x")})
	})
	pid, _ := p.request(MethodPing)
	p.respond(pid, &pb.PingReply{Payload: []byte("x")})
	if _, err := await(t, ping); err != nil {
		t.Fatal(err)
	}
}

func TestScriptedGoAwayResendsOnlyCallsAboveTheLastID(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{})
	payloads := []string{"a", "b", "c"}
	results := make([]chan outcome[*pb.PingReply], len(payloads))
	p := (*peer)(nil)
	for i, payload := range payloads {
		payload := payload
		results[i] = async(func() (*pb.PingReply, error) {
			return c.Ping(context.Background(), &pb.PingRequest{Payload: []byte(payload)})
		})
		if i == 0 {
			p = s.accept()
			p.handshake()
		}
	}
	got := map[uint32]string{}
	for range payloads {
		id, r := p.request(MethodPing)
		var m pb.PingRequest
		if err := proto.Unmarshal(r.Message, &m); err != nil {
			t.Fatal(err)
		}
		got[id] = string(m.Payload)
	}
	// The server processed id 1 only; 2 and 3 crossed its GOAWAY.
	p.send(wire.AppendGoAway(nil, wire.GoAwayFields{LastRequestID: 1, Code: wire.NoError, Reason: "shutting down"}))
	p.respond(1, &pb.PingReply{Payload: []byte(got[1])})
	p2 := s.accept()
	p2.handshake()
	resent := map[string]bool{}
	for i := 0; i < 2; i++ {
		id, r := p2.request(MethodPing)
		var m pb.PingRequest
		if err := proto.Unmarshal(r.Message, &m); err != nil {
			t.Fatal(err)
		}
		resent[string(m.Payload)] = true
		p2.respond(id, &pb.PingReply{Payload: m.Payload})
	}
	if resent[got[1]] || !resent[got[2]] || !resent[got[3]] {
		t.Fatalf("resent %v; first connection had %v", resent, got)
	}
	for i, ch := range results {
		reply, err := await(t, ch)
		if err != nil || string(reply.Payload) != payloads[i] {
			t.Fatalf("call %d: %v, %v", i, reply, err)
		}
	}
	// Nothing left outstanding: the client closes the drained connection.
	p.expectClosed()
	if st := c.Stats(); st.GoAways != 1 || st.Retries != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestScriptedReplyForAnUnknownIDIsAProtocolError(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{MaxAttempts: 1})
	done := async(func() (*pb.PingReply, error) { return c.Ping(context.Background(), nil) })
	p := s.accept()
	p.handshake()
	id, _ := p.request(MethodPing)
	p.respond(id+6, &pb.PingReply{})
	frames := p.expectClosed()
	if len(frames) != 1 || frames[0].Type != wire.GoAway {
		t.Fatalf("client sent %v before closing, want one GOAWAY", frames)
	}
	g, err := wire.ParseGoAway(frames[0].Payload)
	if err != nil || g.Code != wire.ProtocolError || g.LastRequestID != 0 {
		t.Fatalf("GOAWAY %+v, %v", g, err)
	}
	_, err = await(t, done)
	if e := asError(t, err); e.Status != Internal || e.Processing != MayHaveBeenProcessed {
		t.Fatalf("got %+v", e)
	}
}

func TestScriptedTooManyConnectionsIsRetriedOnANewConnection(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{})
	done := async(func() (*pb.PingReply, error) {
		return c.Ping(context.Background(), &pb.PingRequest{Payload: []byte("p")})
	})
	p := s.accept()
	if f := p.next(); f.Type != wire.Hello {
		t.Fatalf("first frame %s", f.Type)
	}
	p.request(MethodPing) // pipelined behind HELLO (0-RTT)
	p.send(wire.AppendGoAway(nil, wire.GoAwayFields{Code: wire.TooManyConnections, Reason: "API key abc has 1 connections, the limit is 1"}))
	_ = p.nc.Close()
	p2 := s.accept()
	p2.handshake()
	id, _ := p2.request(MethodPing)
	p2.respond(id, &pb.PingReply{Payload: []byte("p")})
	if reply, err := await(t, done); err != nil || string(reply.Payload) != "p" {
		t.Fatalf("%v, %v", reply, err)
	}
}

func TestScriptedTooManyConnectionsIsADistinctError(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{MaxAttempts: 2})
	done := async(func() (*pb.PingReply, error) { return c.Ping(context.Background(), nil) })
	for i := 0; i < 2; i++ {
		p := s.accept()
		if f := p.next(); f.Type != wire.Hello {
			t.Fatalf("first frame %s", f.Type)
		}
		p.send(wire.AppendGoAway(nil, wire.GoAwayFields{Code: wire.TooManyConnections, Reason: "limit"}))
		_ = p.nc.Close()
	}
	_, err := await(t, done)
	e := asError(t, err)
	if !errors.Is(err, ErrTooManyConnections) || errors.Is(err, ErrAPIKeyRefused) || e.Status != Unavailable ||
		e.Reason != ReasonTooManyConnections || e.Processing != NotProcessed || !e.Retryable() {
		t.Fatalf("got %+v", e)
	}
}

func TestScriptedRefusedKeyIsFinal(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{APIKey: "lrk_secretsecret"})
	done := async(func() (*pb.PingReply, error) { return c.Ping(context.Background(), nil) })
	p := s.accept()
	if f := p.next(); f.Type != wire.Hello {
		t.Fatalf("first frame %s", f.Type)
	}
	p.send(wire.AppendGoAway(nil, wire.GoAwayFields{Code: wire.Unauthenticated, Reason: "unknown API key"}))
	_ = p.nc.Close()
	_, err := await(t, done)
	e := asError(t, err)
	if !errors.Is(err, ErrAPIKeyRefused) || errors.Is(err, ErrAPIKeyRevoked) || errors.Is(err, ErrTooManyConnections) ||
		e.Status != Unauthenticated || e.Reason != ReasonAPIKeyRefused || e.Retryable() {
		t.Fatalf("got %+v", e)
	}
	if strings.Contains(err.Error(), "secretsecret") {
		t.Fatalf("the error names the key: %v", err)
	}
	// Final: the next call fails at once, without a new connection.
	if _, err := c.Ping(context.Background(), nil); !errors.Is(err, ErrAPIKeyRefused) {
		t.Fatalf("second call: %v", err)
	}
	if st := c.Stats(); st.ConnectAttempts != 1 {
		t.Fatalf("stats %+v, want one connection attempt", st)
	}
}

func TestScriptedRevocationAfterWelcome(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{})
	done := async(func() (*pb.PingReply, error) { return c.Ping(context.Background(), nil) })
	conn := s.accept()
	conn.handshake()
	id, _ := conn.request(MethodPing)
	conn.respond(id, &pb.PingReply{})
	if _, err := await(t, done); err != nil {
		t.Fatal(err)
	}
	second := async(func() (*pb.PingReply, error) { return c.Ping(context.Background(), nil) })
	id2, _ := conn.request(MethodPing)
	// Revoked: the call already accepted is answered, nothing after it runs.
	conn.send(wire.AppendGoAway(nil, wire.GoAwayFields{LastRequestID: id2, Code: wire.Unauthenticated, Reason: "API key revoked"}))
	conn.respond(id2, &pb.PingReply{})
	if _, err := await(t, second); err != nil {
		t.Fatalf("the call below the GOAWAY's last id: %v", err)
	}
	_, err := c.Ping(context.Background(), nil)
	e := asError(t, err)
	if !errors.Is(err, ErrAPIKeyRevoked) || !errors.Is(err, ErrAPIKeyRefused) || e.Status != Unauthenticated || e.Reason != ReasonAPIKeyRevoked {
		t.Fatalf("got %+v", e)
	}
}

func TestScriptedLostConnectionResendsAnIdempotentCall(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{})
	req := startRequest("lost-1")
	done := async(func() (*pb.StartActivityReply, error) { return c.StartActivity(context.Background(), req) })
	p := s.accept()
	p.handshake()
	_, r := p.request(MethodStartActivity)
	_ = p.nc.Close() // lost while outstanding: it may have been processed
	p2 := s.accept()
	p2.handshake()
	id, r2 := p2.request(MethodStartActivity)
	if string(r2.Message) != string(r.Message) {
		t.Fatal("the resent request differs from the first one")
	}
	p2.respond(id, &pb.StartActivityReply{Replayed: true})
	if reply, err := await(t, done); err != nil || !reply.GetReplayed() {
		t.Fatalf("%v, %v", reply, err)
	}
}

func TestScriptedLostConnectionFailsANonIdempotentCall(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{})
	done := async(func() (*pb.DeleteChannelReply, error) {
		return c.DeleteChannel(context.Background(), &pb.DeleteChannelRequest{AppId: "dev.app", ChannelId: "abc"})
	})
	p := s.accept()
	p.handshake()
	p.request(MethodDeleteChannel)
	_ = p.nc.Close()
	_, err := await(t, done)
	if e := asError(t, err); e.Status != Unavailable || e.Processing != MayHaveBeenProcessed || e.Retryable() {
		t.Fatalf("got %+v", e)
	}
}

func TestScriptedDeadlineIsSentEnforcedAndCancelled(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := async(func() (*pb.PingReply, error) { return c.Ping(ctx, nil) })
	p := s.accept()
	p.handshake()
	id, r := p.request(MethodPing)
	if r.TimeoutMS == 0 || r.TimeoutMS > 2000 {
		t.Fatalf("timeout_ms %d, want 1...2000", r.TimeoutMS)
	}
	// The server does not answer: the client gives up at its deadline and cancels.
	_, err := await(t, done)
	e := asError(t, err)
	if e.Status != DeadlineExceeded || e.Processing != MayHaveBeenProcessed || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %+v", e)
	}
	if f := p.next(); f.Type != wire.Cancel || f.RequestID != id {
		t.Fatalf("frame %s id %d, want CANCEL %d", f.Type, f.RequestID, id)
	}
	// The server's one reply to the cancelled call is dropped; the connection goes on.
	p.fail(id, Cancelled, "cancelled", nil)
	next := async(func() (*pb.PingReply, error) {
		return c.Ping(context.Background(), &pb.PingRequest{Payload: []byte("ok")})
	})
	id2, _ := p.request(MethodPing)
	p.respond(id2, &pb.PingReply{Payload: []byte("ok")})
	if reply, err := await(t, next); err != nil || string(reply.Payload) != "ok" {
		t.Fatalf("%v, %v", reply, err)
	}
}

func TestScriptedCancelSendsCancel(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := async(func() (*pb.RegisterTokenReply, error) {
		return c.RegisterToken(ctx, &pb.RegisterTokenRequest{AppId: "dev.app"})
	})
	p := s.accept()
	p.handshake()
	id, _ := p.request(MethodRegisterToken)
	cancel()
	_, err := await(t, done)
	if e := asError(t, err); e.Status != Cancelled || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %+v", e)
	}
	if f := p.next(); f.Type != wire.Cancel || f.RequestID != id {
		t.Fatalf("frame %s id %d, want CANCEL %d", f.Type, f.RequestID, id)
	}
}

func TestScriptedKeepaliveDeclaresASilentConnectionDead(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{MaxAttempts: 1, KeepaliveInterval: 20 * time.Millisecond, KeepaliveTimeout: 20 * time.Millisecond})
	done := async(func() (*pb.PingReply, error) { return c.Ping(context.Background(), nil) })
	p := s.accept()
	p.handshake()
	p.request(MethodPing)
	if f := p.next(); f.Type != wire.Ping {
		t.Fatalf("frame %s, want PING", f.Type)
	}
	_, err := await(t, done) // no PONG: dead
	if e := asError(t, err); e.Status != Unavailable || e.Processing != MayHaveBeenProcessed {
		t.Fatalf("got %+v", e)
	}
}

func TestScriptedKeepaliveAnsweredKeepsTheCall(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{MaxAttempts: 1, KeepaliveInterval: 20 * time.Millisecond, KeepaliveTimeout: time.Minute})
	done := async(func() (*pb.PingReply, error) {
		return c.Ping(context.Background(), &pb.PingRequest{Payload: []byte("k")})
	})
	p := s.accept()
	p.handshake()
	id, _ := p.request(MethodPing)
	f := p.next()
	if f.Type != wire.Ping {
		t.Fatalf("frame %s, want PING", f.Type)
	}
	data, err := wire.ParsePing(f.Type, f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	p.send(wire.AppendPong(nil, data))
	p.respond(id, &pb.PingReply{Payload: []byte("k")})
	if reply, err := await(t, done); err != nil || string(reply.Payload) != "k" {
		t.Fatalf("%v, %v", reply, err)
	}
}

func TestScriptedServerPingIsAnswered(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{})
	done := async(func() (*pb.PingReply, error) { return c.Ping(context.Background(), nil) })
	p := s.accept()
	p.handshake()
	id, _ := p.request(MethodPing)
	data := [8]byte{9, 8, 7, 6, 5, 4, 3, 2}
	p.send(wire.AppendPing(nil, data))
	f := p.next()
	if got, err := wire.ParsePing(f.Type, f.Payload); f.Type != wire.Pong || err != nil || got != data {
		t.Fatalf("frame %s %v, want PONG %v", f.Type, got, data)
	}
	p.respond(id, &pb.PingReply{})
	if _, err := await(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestScriptedServerLimitsCallsInFlight(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{})
	first := async(func() (*pb.PingReply, error) {
		return c.Ping(context.Background(), &pb.PingRequest{Payload: []byte("1")})
	})
	p := s.accept()
	p.handshake(wire.SettingPair{ID: wire.SettingMaxRequestsInFlight, Value: 1})
	// The client reads frames in order: its PONG means it has read WELCOME.
	p.send(wire.AppendPing(nil, [8]byte{1}))
	var id1 uint32
	for pong := false; !pong || id1 == 0; {
		f := p.next()
		switch f.Type {
		case wire.Pong:
			pong = true
		case wire.Request:
			id1 = f.RequestID
		default:
			t.Fatalf("unexpected %s", f.Type)
		}
	}
	second := async(func() (*pb.PingReply, error) {
		return c.Ping(context.Background(), &pb.PingRequest{Payload: []byte("2")})
	})
	// One call in flight is the limit: the second REQUEST waits for the
	// first reply, so the answer to this PING comes before it.
	p.send(wire.AppendPing(nil, [8]byte{2}))
	if f := p.next(); f.Type != wire.Pong {
		t.Fatalf("frame %s, want PONG (the second REQUEST must wait)", f.Type)
	}
	p.respond(id1, &pb.PingReply{Payload: []byte("1")})
	id2, _ := p.request(MethodPing)
	p.respond(id2, &pb.PingReply{Payload: []byte("2")})
	for _, ch := range []chan outcome[*pb.PingReply]{first, second} {
		if _, err := await(t, ch); err != nil {
			t.Fatal(err)
		}
	}
}

func TestScriptedIdleTimeoutReconnectsOnlyForTheNextCall(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{})
	done := async(func() (*pb.PingReply, error) { return c.Ping(context.Background(), nil) })
	p := s.accept()
	p.handshake(wire.SettingPair{ID: wire.SettingIdleTimeoutMS, Value: 1000})
	id, _ := p.request(MethodPing)
	p.respond(id, &pb.PingReply{})
	if _, err := await(t, done); err != nil {
		t.Fatal(err)
	}
	p.send(wire.AppendGoAway(nil, wire.GoAwayFields{LastRequestID: id, Code: wire.IdleTimeout, Reason: "idle"}))
	// Nothing outstanding: the client closes too, and opens nothing until a call needs it.
	p.expectClosed()
	if st := c.Stats(); st.ConnectAttempts != 1 || st.GoAways != 1 {
		t.Fatalf("stats %+v", st)
	}
	next := async(func() (*pb.PingReply, error) { return c.Ping(context.Background(), nil) })
	p2 := s.accept()
	p2.handshake()
	id2, _ := p2.request(MethodPing)
	if id2 != 1 {
		t.Fatalf("the new connection's first id is %d", id2)
	}
	p2.respond(id2, &pb.PingReply{})
	if _, err := await(t, next); err != nil {
		t.Fatal(err)
	}
}

func TestScriptedErrorDetails(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{})
	done := async(func() (*pb.RegisterTokenReply, error) {
		return c.RegisterToken(context.Background(), &pb.RegisterTokenRequest{AppId: "dev.app"})
	})
	p := s.accept()
	p.handshake()
	id, _ := p.request(MethodRegisterToken)
	p.fail(id, InvalidArgument, "bad token", &pb.ErrorDetails{
		Reason:          "InvalidField",
		FieldViolations: []*pb.FieldViolation{{Field: "token", Description: "not hex"}, {Field: "kind", Description: "missing"}},
	})
	_, err := await(t, done)
	e := asError(t, err)
	if e.Status != InvalidArgument || e.Message != "bad token" || e.Reason != "InvalidField" || e.Processing != Answered ||
		len(e.FieldViolations) != 2 || e.FieldViolations[0] != (FieldViolation{"token", "not hex"}) {
		t.Fatalf("got %+v", e)
	}
	if want := "liverelay: INVALID_ARGUMENT: bad token (reason InvalidField); token: not hex; kind: missing"; e.Error() != want {
		t.Fatalf("Error() = %q\nwant      %q", e.Error(), want)
	}
}

// The webhook methods send their request to their own path and return the
// reply as sent; GetWebhook, a read, is resent after a lost connection, and
// PutWebhook, which may mint a secret, is not.
func TestScriptedWebhookMethods(t *testing.T) {
	s := newScripted(t)
	c := s.client(Config{})
	ctx := context.Background()
	hook := &adminpb.Webhook{
		AppId: proto.String("dev.app"), Url: proto.String("https://hooks.example.com/in"),
		EventKinds: []string{"EVENT_KIND_PUSH_FAILED"}, State: proto.String("delivering"), DeliveredCursor: proto.Uint64(7),
	}
	put := &adminpb.PutWebhookRequest{
		AppId: proto.String("dev.app"), Url: proto.String("https://hooks.example.com/in"),
		EventKinds: []string{"EVENT_KIND_PUSH_FAILED"}, RotateSecret: proto.Bool(true),
	}
	putDone := async(func() (*adminpb.PutWebhookReply, error) { return c.PutWebhook(ctx, put) })
	p := s.accept()
	p.handshake()
	id, r := p.request(MethodPutWebhook)
	sent := new(adminpb.PutWebhookRequest)
	if err := proto.Unmarshal(r.Message, sent); err != nil || !proto.Equal(sent, put) {
		t.Fatalf("PutWebhook sent %v (%v)", sent, err)
	}
	p.respond(id, &adminpb.PutWebhookReply{Webhook: hook, SigningSecret: proto.String("whsec_" + strings.Repeat("ab", 32))})
	if reply, err := await(t, putDone); err != nil || !proto.Equal(reply.GetWebhook(), hook) || !strings.HasPrefix(reply.GetSigningSecret(), "whsec_") {
		t.Fatalf("PutWebhook: %v, %v", reply, err)
	}

	calls := []struct {
		method string
		call   func() (*adminpb.WebhookReply, error)
	}{
		{MethodGetWebhook, func() (*adminpb.WebhookReply, error) {
			return c.GetWebhook(ctx, &adminpb.GetWebhookRequest{AppId: proto.String("dev.app")})
		}},
		{MethodDeleteWebhook, func() (*adminpb.WebhookReply, error) {
			return c.DeleteWebhook(ctx, &adminpb.DeleteWebhookRequest{AppId: proto.String("dev.app")})
		}},
		{MethodResetWebhook, func() (*adminpb.WebhookReply, error) {
			return c.ResetWebhook(ctx, &adminpb.ResetWebhookRequest{AppId: proto.String("dev.app")})
		}},
	}
	for _, call := range calls {
		done := async(call.call)
		id, r := p.request(call.method)
		if string(r.Message) != "\x0a\x07dev.app" {
			t.Fatalf("%s sent %x", call.method, r.Message)
		}
		p.respond(id, &adminpb.WebhookReply{Webhook: hook})
		if reply, err := await(t, done); err != nil || !proto.Equal(reply.GetWebhook(), hook) {
			t.Fatalf("%s: %v, %v", call.method, reply, err)
		}
	}

	getDone := async(func() (*adminpb.WebhookReply, error) {
		return c.GetWebhook(ctx, &adminpb.GetWebhookRequest{AppId: proto.String("dev.app")})
	})
	p.request(MethodGetWebhook)
	_ = p.nc.Close()
	p2 := s.accept()
	p2.handshake()
	id, _ = p2.request(MethodGetWebhook)
	p2.respond(id, &adminpb.WebhookReply{Webhook: hook})
	if _, err := await(t, getDone); err != nil {
		t.Fatalf("GetWebhook after a lost connection: %v", err)
	}

	putDone = async(func() (*adminpb.PutWebhookReply, error) { return c.PutWebhook(ctx, put) })
	p2.request(MethodPutWebhook)
	_ = p2.nc.Close()
	_, err := await(t, putDone)
	if e := asError(t, err); e.Status != Unavailable || e.Processing != MayHaveBeenProcessed {
		t.Fatalf("PutWebhook after a lost connection: %+v", e)
	}
}
