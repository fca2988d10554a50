package liverelay

// Tests against a real `liverelay serve` (server_test.go starts it).

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/liverelay/liverelay/clients/go/adminpb"
	"github.com/liverelay/liverelay/clients/go/internal/wire"
	pb "github.com/liverelay/liverelay/clients/go/liverelaypb"
	"google.golang.org/protobuf/proto"
)

const devApp = "dev.app"

// token is a fresh APNs device token: 64 lowercase hex digits.
func token() string {
	var b [32]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// uid makes ids unique across runs against one data directory.
func uid(prefix string) string {
	var b [6]byte
	_, _ = crand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// registerPushToStart registers a push-to-start token of dev.app for DeliveryAttributes.
func registerPushToStart(t *testing.T, c *Client, tok string) {
	t.Helper()
	_, err := c.RegisterToken(testContext(t), &pb.RegisterTokenRequest{
		AppId: devApp, Kind: pb.TokenKind_TOKEN_KIND_PUSH_TO_START, Token: tok,
		Environment: pb.Environment_ENVIRONMENT_SANDBOX, AttributesType: "DeliveryAttributes",
	})
	if err != nil {
		t.Fatal(err)
	}
}

func startOf(activity, tok string) *pb.StartActivityRequest {
	return &pb.StartActivityRequest{
		AppId:            proto.String(devApp),
		ActivityId:       proto.String(activity),
		AttributesType:   proto.String("DeliveryAttributes"),
		AttributesJson:   proto.String(`{"orderId":1}`),
		ContentStateJson: proto.String(`{"status":"preparing"}`),
		Alert:            &pb.Alert{Title: proto.String("Order placed")},
		Targets:          &pb.Targets{PushToStartTokens: []string{tok}},
	}
}

func TestServerPing(t *testing.T) {
	s := needServer(t)
	c := clientFor(t, s, Config{})
	reply, err := c.Ping(testContext(t), &pb.PingRequest{Payload: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	if string(reply.Payload) != "hello" || reply.ServerVersion == "" || reply.ServerTimeMs <= 0 {
		t.Fatalf("reply %v", reply)
	}
	// The first call opens every connection of the pool (two by default).
	if st := c.Stats(); st.Connections < 1 || st.ConnectAttempts != 2 || st.Retries != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestServerActivityLifecycle(t *testing.T) {
	s := needServer(t)
	c := clientFor(t, s, Config{})
	ctx := testContext(t)
	startToken, updateToken := token(), token()

	reg := &pb.RegisterTokenRequest{
		AppId: devApp, Kind: pb.TokenKind_TOKEN_KIND_PUSH_TO_START, Token: startToken,
		Environment: pb.Environment_ENVIRONMENT_SANDBOX, AttributesType: "DeliveryAttributes",
	}
	r1, err := c.RegisterToken(ctx, reg)
	if err != nil || r1.Result != pb.RegisterTokenResult_REGISTER_TOKEN_RESULT_CREATED {
		t.Fatalf("register: %v, %v", r1, err)
	}
	r2, err := c.RegisterToken(ctx, reg)
	if err != nil || r2.Result != pb.RegisterTokenResult_REGISTER_TOKEN_RESULT_UNCHANGED {
		t.Fatalf("register again: %v, %v", r2, err)
	}

	activity := uid("order")
	start := startOf(activity, startToken)
	start.WaitForDelivery = proto.Bool(true)
	sr, err := c.StartActivity(ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	if start.GetIdempotencyKey() == "" {
		t.Fatal("StartActivity did not set an idempotency key on the request")
	}
	if sr.ActivityId != activity || sr.Replayed || sr.State != pb.ActivityState_ACTIVITY_STATE_STARTING ||
		sr.Summary.GetTargeted() != 1 || sr.Summary.GetDelivered() != 1 || !sr.Summary.GetComplete() {
		t.Fatalf("start reply %v", sr)
	}
	// The same request again is the same call: the server replays its reply.
	again, err := c.StartActivity(ctx, start)
	if err != nil || !again.Replayed || again.Timestamp != sr.Timestamp {
		t.Fatalf("resent start: %v, %v", again, err)
	}

	if _, err := c.RegisterToken(ctx, &pb.RegisterTokenRequest{
		AppId: devApp, Kind: pb.TokenKind_TOKEN_KIND_UPDATE, Token: updateToken,
		Environment: pb.Environment_ENVIRONMENT_SANDBOX, ActivityId: activity,
	}); err != nil {
		t.Fatal(err)
	}
	ur, err := c.UpdateActivity(ctx, &pb.UpdateActivityRequest{
		AppId: proto.String(devApp), ActivityId: proto.String(activity),
		ContentStateJson: proto.String(`{"status":"on the way"}`), WaitForDelivery: proto.Bool(true),
	})
	if err != nil || ur.State != pb.ActivityState_ACTIVITY_STATE_ACTIVE || ur.Summary.GetDelivered() != 1 {
		t.Fatalf("update: %v, %v", ur, err)
	}
	key := "end-" + activity
	end := &pb.EndActivityRequest{
		AppId: proto.String(devApp), ActivityId: proto.String(activity),
		ContentStateJson: proto.String(`{"status":"delivered"}`), IdempotencyKey: proto.String(key),
	}
	er, err := c.EndActivity(ctx, end)
	if err != nil || er.State != pb.ActivityState_ACTIVITY_STATE_ENDED || er.Replayed || end.GetIdempotencyKey() != key {
		t.Fatalf("end: %v, %v (key %q)", er, err, end.GetIdempotencyKey())
	}
	// After the end, an update is refused with the reason.
	_, err = c.UpdateActivity(ctx, &pb.UpdateActivityRequest{
		AppId: proto.String(devApp), ActivityId: proto.String(activity), ContentStateJson: proto.String(`{"status":"late"}`),
	})
	expectStatus(t, err, FailedPrecondition, "ActivityEnded")
}

// expectStatus checks that err is a *Error the server answered with status and reason.
func expectStatus(t *testing.T, err error, status Status, reason string) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s %s", status, reason)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *Error", err, err)
	}
	if e.Status != status || e.Reason != reason {
		t.Fatalf("got %s reason %q (%v), want %s reason %q", e.Status, e.Reason, e, status, reason)
	}
	return e
}

// expectInvalid checks for INVALID_ARGUMENT: the field violations name the
// fields and the reason is InvalidField (PROTOCOL.md section 7).
func expectInvalid(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Status != InvalidArgument || e.Reason != "InvalidField" || e.Processing != Answered {
		t.Fatalf("got %v, want INVALID_ARGUMENT", err)
	}
	return e
}

func TestServerErrorStatuses(t *testing.T) {
	s := needServer(t)
	c := clientFor(t, s, Config{Connections: 1})
	ctx := testContext(t)

	// INVALID_ARGUMENT names the field.
	_, err := c.RegisterToken(ctx, &pb.RegisterTokenRequest{
		AppId: devApp, Kind: pb.TokenKind_TOKEN_KIND_PUSH_TO_START, Token: "not-hex",
		Environment: pb.Environment_ENVIRONMENT_SANDBOX, AttributesType: "DeliveryAttributes",
	})
	e := expectInvalid(t, err)
	if len(e.FieldViolations) == 0 || e.FieldViolations[0].Field != "token" || e.FieldViolations[0].Description == "" {
		t.Fatalf("field violations %+v", e.FieldViolations)
	}
	if e.Processing != Answered || e.Retryable() {
		t.Fatalf("processing %v retryable %v", e.Processing, e.Retryable())
	}
	// A nested field's path.
	bad := startOf(uid("bad"), "XYZ")
	_, err = c.StartActivity(ctx, bad)
	e = expectInvalid(t, err)
	if len(e.FieldViolations) == 0 || e.FieldViolations[0].Field != "targets.push_to_start_tokens[0]" {
		t.Fatalf("field violations %+v", e.FieldViolations)
	}

	// NOT_FOUND: an activity never started.
	_, err = c.UpdateActivity(ctx, &pb.UpdateActivityRequest{
		AppId: proto.String(devApp), ActivityId: proto.String(uid("never")), ContentStateJson: proto.String(`{}`),
	})
	expectStatus(t, err, NotFound, "ActivityNotFound")

	// ALREADY_EXISTS: the same activity id under another idempotency key.
	tok := token()
	registerPushToStart(t, c, tok)
	activity := uid("dup")
	if _, err := c.StartActivity(ctx, startOf(activity, tok)); err != nil {
		t.Fatal(err)
	}
	_, err = c.StartActivity(ctx, startOf(activity, tok))
	expectStatus(t, err, AlreadyExists, "ActivityAlreadyExists")

	// FAILED_PRECONDITION: an idempotency key reused for another request.
	key := uid("key")
	first := startOf(uid("k1"), tok)
	first.IdempotencyKey = proto.String(key)
	if _, err := c.StartActivity(ctx, first); err != nil {
		t.Fatal(err)
	}
	changed := proto.Clone(first).(*pb.StartActivityRequest)
	changed.ContentStateJson = proto.String(`{"status":"other"}`)
	_, err = c.StartActivity(ctx, changed)
	expectStatus(t, err, FailedPrecondition, "IdempotencyKeyReused")

	// PERMISSION_DENIED: a tenant key on the admin API, and another app.
	_, err = c.ListApps(ctx, &adminpb.ListAppsRequest{})
	expectStatus(t, err, PermissionDenied, "")
	_, err = c.RegisterToken(ctx, &pb.RegisterTokenRequest{
		AppId: "someone.else", Kind: pb.TokenKind_TOKEN_KIND_PUSH_TO_START, Token: token(),
		Environment: pb.Environment_ENVIRONMENT_SANDBOX, AttributesType: "DeliveryAttributes",
	})
	expectStatus(t, err, PermissionDenied, "")

	// UNIMPLEMENTED: a method the server does not have.
	err = c.Invoke(ctx, "/liverelay.v1.LiveRelay/NoSuchMethod", &pb.PingRequest{}, &pb.PingReply{})
	expectStatus(t, err, Unimplemented, "")

	// The connection survived every refusal.
	if st := c.Stats(); st.ConnectAttempts != 1 || st.Retries != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestServerChannels(t *testing.T) {
	s := needServer(t)
	c := clientFor(t, s, Config{})
	ctx := testContext(t)
	created, err := c.CreateChannel(ctx, &pb.CreateChannelRequest{
		AppId: devApp, Environment: pb.Environment_ENVIRONMENT_SANDBOX,
		StoragePolicy: pb.ChannelStoragePolicy_CHANNEL_STORAGE_POLICY_NO_STORAGE,
	})
	if err != nil {
		t.Fatal(err)
	}
	id := created.Channel.GetChannelId()
	if id == "" || created.Channel.GetAppId() != devApp {
		t.Fatalf("created %v", created)
	}
	found := false
	for pageToken := ""; ; {
		page, err := c.ListChannels(ctx, &pb.ListChannelsRequest{AppId: devApp, PageSize: 1000, PageToken: pageToken})
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range page.Channels {
			found = found || ch.ChannelId == id
		}
		if pageToken = page.NextPageToken; pageToken == "" {
			break
		}
	}
	if !found {
		t.Fatalf("channel %s not listed", id)
	}
	// An update sent only to the channel.
	tok := token()
	registerPushToStart(t, c, tok)
	activity := uid("match")
	start := startOf(activity, tok)
	start.ChannelId = proto.String(id)
	if _, err := c.StartActivity(ctx, start); err != nil {
		t.Fatal(err)
	}
	ur, err := c.UpdateActivity(ctx, &pb.UpdateActivityRequest{
		AppId: proto.String(devApp), ActivityId: proto.String(activity), ContentStateJson: proto.String(`{"score":"1-0"}`),
		ChannelId: proto.String(id), ChannelOnly: proto.Bool(true), WaitForDelivery: proto.Bool(true),
	})
	if err != nil || ur.Summary.GetTargeted() != 1 || ur.Summary.GetDelivered() != 1 {
		t.Fatalf("channel update: %v, %v", ur, err)
	}
	if _, err := c.DeleteChannel(ctx, &pb.DeleteChannelRequest{AppId: devApp, ChannelId: id}); err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteChannel(ctx, &pb.DeleteChannelRequest{AppId: devApp, ChannelId: id})
	expectStatus(t, err, NotFound, "ChannelNotFound")
}

func TestServerLargeRequestBeforeWelcome(t *testing.T) {
	s := needServer(t)
	c := clientFor(t, s, Config{})
	// Above 16 KiB: the first call waits for WELCOME before it is sent.
	payload := bytes.Repeat([]byte("x"), 100_000)
	reply, err := c.Ping(testContext(t), &pb.PingRequest{Payload: payload})
	if err != nil || !bytes.Equal(reply.Payload, payload) {
		t.Fatalf("%d bytes back, %v", len(reply.GetPayload()), err)
	}
}

// frameWatch records the frames one client writes (testHookWrite).
type frameWatch struct {
	frames chan wire.Frame
}

func watchFrames(t *testing.T, c *Client, also func(wire.Frame)) *frameWatch {
	w := &frameWatch{frames: make(chan wire.Frame, 4096)}
	hook := func(cn *conn, b []byte) {
		if cn.client != c || len(b) < wire.HeaderSize {
			return
		}
		f := wire.Frame{Header: wire.ParseHeader(b), Payload: append([]byte(nil), b[wire.HeaderSize:]...)}
		if also != nil {
			also(f)
		}
		select {
		case w.frames <- f:
		default:
		}
	}
	testHookWrite.Store(&hook)
	t.Cleanup(func() { testHookWrite.Store(nil) })
	return w
}

// next waits for the next written frame of type ft.
func (w *frameWatch) next(t *testing.T, ft wire.FrameType) wire.Frame {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case f := <-w.frames:
			if f.Type == ft {
				return f
			}
		case <-timeout:
			t.Fatalf("no %s frame written", ft)
		}
	}
}

// tap sits under TLS: it can hold back what the server sends, or cut the
// connection when the server's next bytes arrive.
type tap struct {
	mu     sync.Mutex
	gate   chan struct{} // non-nil: reads are held until it is closed
	cutArm bool
	cut    chan struct{}
	dials  atomic.Int64
}

func (tp *tap) dial(ctx context.Context, network, address string) (net.Conn, error) {
	tp.dials.Add(1)
	nc, err := (&net.Dialer{}).DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &tapConn{Conn: nc, tp: tp}, nil
}

func (tp *tap) hold() {
	tp.mu.Lock()
	tp.gate = make(chan struct{})
	tp.mu.Unlock()
}

func (tp *tap) release() {
	tp.mu.Lock()
	if tp.gate != nil {
		close(tp.gate)
		tp.gate = nil
	}
	tp.mu.Unlock()
}

// armCut makes the next bytes from the server vanish with the connection.
func (tp *tap) armCut() {
	tp.mu.Lock()
	tp.cutArm = true
	tp.cut = make(chan struct{})
	tp.mu.Unlock()
}

type tapConn struct {
	net.Conn
	tp *tap
}

func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.tp.mu.Lock()
	if n > 0 && c.tp.cutArm {
		c.tp.cutArm = false
		close(c.tp.cut)
		c.tp.mu.Unlock()
		_ = c.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	gate := c.tp.gate
	c.tp.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return n, err
}

func TestServerDeadlineIsSentEnforcedAndCancelled(t *testing.T) {
	s := needServer(t)
	tp := &tap{}
	c := clientFor(t, s, Config{Connections: 1, DialContext: tp.dial})
	if _, err := c.Ping(testContext(t), nil); err != nil {
		t.Fatal(err)
	}
	w := watchFrames(t, c, nil)
	// The server's reply is held back: the call can only end by its deadline.
	tp.hold()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.Ping(ctx, &pb.PingRequest{Payload: []byte("late")})
	tp.release()
	e := expectStatus(t, err, DeadlineExceeded, "")
	if e.Processing != MayHaveBeenProcessed || !errors.Is(err, context.DeadlineExceeded) || !e.RetryableIfIdempotent() {
		t.Fatalf("got %+v", e)
	}
	req := w.next(t, wire.Request)
	r, err := wire.ParseRequest(req.Payload)
	if err != nil || r.TimeoutMS == 0 || r.TimeoutMS > 2000 {
		t.Fatalf("REQUEST timeout_ms %d (%v), want 1...2000", r.TimeoutMS, err)
	}
	if cancelFrame := w.next(t, wire.Cancel); cancelFrame.RequestID != req.RequestID {
		t.Fatalf("CANCEL for id %d, the call was %d", cancelFrame.RequestID, req.RequestID)
	}
	// The late reply is dropped and the connection goes on.
	reply, err := c.Ping(testContext(t), &pb.PingRequest{Payload: []byte("next")})
	if err != nil || string(reply.Payload) != "next" {
		t.Fatalf("%v, %v", reply, err)
	}
	if st := c.Stats(); st.ConnectAttempts != 1 {
		t.Fatalf("stats %+v: the connection was replaced", st)
	}
}

func TestServerCancelSendsCancel(t *testing.T) {
	s := needServer(t)
	tp := &tap{}
	c := clientFor(t, s, Config{Connections: 1, DialContext: tp.dial})
	if _, err := c.Ping(testContext(t), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sent := make(chan uint32, 1)
	w := watchFrames(t, c, func(f wire.Frame) {
		if f.Type == wire.Request {
			select {
			case sent <- f.RequestID:
			default:
			}
		}
	})
	tp.hold()
	go func() { <-sent; cancel() }()
	_, err := c.RegisterToken(ctx, &pb.RegisterTokenRequest{
		AppId: devApp, Kind: pb.TokenKind_TOKEN_KIND_PUSH_TO_START, Token: token(),
		Environment: pb.Environment_ENVIRONMENT_SANDBOX, AttributesType: "DeliveryAttributes",
	})
	tp.release()
	e := expectStatus(t, err, Cancelled, "")
	if !errors.Is(err, context.Canceled) || e.Processing != MayHaveBeenProcessed {
		t.Fatalf("got %+v", e)
	}
	req := w.next(t, wire.Request)
	if f := w.next(t, wire.Cancel); f.RequestID != req.RequestID {
		t.Fatalf("CANCEL for id %d, the call was %d", f.RequestID, req.RequestID)
	}
	if _, err := c.Ping(testContext(t), nil); err != nil {
		t.Fatal(err)
	}
}

func TestServerLostConnectionResendsWithTheSameKey(t *testing.T) {
	s := needServer(t)
	tp := &tap{}
	c := clientFor(t, s, Config{Connections: 1, DialContext: tp.dial})
	tok := token()
	registerPushToStart(t, c, tok)
	var sentKeys []string
	var mu sync.Mutex
	watchFrames(t, c, func(f wire.Frame) {
		if f.Type != wire.Request {
			return
		}
		r, err := wire.ParseRequest(f.Payload)
		if err != nil || r.Method != MethodStartActivity {
			return
		}
		var m pb.StartActivityRequest
		_ = proto.Unmarshal(r.Message, &m)
		mu.Lock()
		sentKeys = append(sentKeys, m.GetIdempotencyKey())
		first := len(sentKeys) == 1
		mu.Unlock()
		if first {
			// The server's answer to the first attempt is lost with the connection.
			tp.armCut()
		}
	})
	req := startOf(uid("lost"), tok)
	reply, err := c.StartActivity(testContext(t), req)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sentKeys) != 2 || sentKeys[0] == "" || sentKeys[0] != sentKeys[1] || sentKeys[0] != req.GetIdempotencyKey() {
		t.Fatalf("keys sent %q, request's %q", sentKeys, req.GetIdempotencyKey())
	}
	// The first attempt was processed (its answer arrived, then vanished):
	// the resend is a replay, not a second start.
	if !reply.Replayed {
		t.Fatalf("reply %v, want a replay", reply)
	}
	if st := c.Stats(); st.Retries != 1 || tp.dials.Load() != 2 {
		t.Fatalf("stats %+v, dials %d", st, tp.dials.Load())
	}
}

func TestServerPipeliningDepth1000(t *testing.T) {
	s := needServer(t)
	c := clientFor(t, s, Config{Connections: 1})
	const n = 1000
	ctx := testContext(t)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			want := fmt.Sprintf("call-%d", i)
			reply, err := c.Ping(ctx, &pb.PingRequest{Payload: []byte(want)})
			if err == nil && string(reply.Payload) != want {
				err = fmt.Errorf("call %d got the reply %q", i, reply.Payload)
			}
			if err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := c.Stats(); st.ConnectAttempts != 1 || st.Retries != 0 {
		t.Fatalf("stats %+v: want every call on one connection, none resent", st)
	}
}

func TestServerManyGoroutines(t *testing.T) {
	s := needServer(t)
	c := clientFor(t, s, Config{Connections: 3})
	ctx := testContext(t)
	const workers, calls = 64, 25
	run := uid("device")
	var wg sync.WaitGroup
	errs := make(chan error, workers*calls)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				var err error
				if i%2 == 0 {
					var r *pb.RegisterTokenReply
					r, err = c.RegisterToken(ctx, &pb.RegisterTokenRequest{
						AppId: devApp, Kind: pb.TokenKind_TOKEN_KIND_PUSH_TO_START, Token: token(),
						Environment: pb.Environment_ENVIRONMENT_SANDBOX, AttributesType: "DeliveryAttributes",
						DeviceId: fmt.Sprintf("%s-%d-%d", run, w, i),
					})
					if err == nil && r.Result != pb.RegisterTokenResult_REGISTER_TOKEN_RESULT_CREATED {
						err = fmt.Errorf("worker %d call %d: result %v", w, i, r.Result)
					}
				} else {
					want := fmt.Sprintf("%d/%d", w, i)
					var r *pb.PingReply
					r, err = c.Ping(ctx, &pb.PingRequest{Payload: []byte(want)})
					if err == nil && string(r.Payload) != want {
						err = fmt.Errorf("worker %d call %d: reply %q", w, i, r.Payload)
					}
				}
				if err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestServerGoAwayDrainAndReconnect(t *testing.T) {
	needServer(t)
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	a := startExtraServer(t, dirA)
	// B is another node with A's certificate and key file: the same key works on both.
	if err := os.MkdirAll(dirB, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"cert.pem", "key.pem", "api-keys.json"} {
		data, err := os.ReadFile(filepath.Join(dirA, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dirB, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b := startExtraServer(t, dirB)

	// A load balancer in front of both: A until it is told to drain, then B.
	var target atomic.Value
	target.Store(a.addr)
	var dialsB atomic.Int64
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		addr := target.Load().(string)
		if addr == b.addr {
			dialsB.Add(1)
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	c := clientFor(t, a, Config{Connections: 2, DialContext: dial})

	var ok atomic.Int64
	var stop atomic.Bool
	phase1, phase2 := make(chan struct{}), make(chan struct{})
	var once1, once2 sync.Once
	var phase2At atomic.Int64
	phase2At.Store(1 << 62)
	errs := make(chan error, 1000)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				want := fmt.Sprintf("%d/%d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				r, err := c.Ping(ctx, &pb.PingRequest{Payload: []byte(want)})
				cancel()
				if err == nil && string(r.Payload) != want {
					err = fmt.Errorf("reply %q to %q", r.Payload, want)
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				n := ok.Add(1)
				if n >= 300 {
					once1.Do(func() { close(phase1) })
				}
				if n >= phase2At.Load() {
					once2.Do(func() { close(phase2) })
				}
			}
		}(w)
	}
	waitOrFail := func(ch chan struct{}, what string) {
		select {
		case <-ch:
		case err := <-errs:
			t.Fatalf("a call failed %s: %v", what, err)
		case <-time.After(120 * time.Second):
			t.Fatalf("the calls made no progress %s", what)
		}
	}
	waitOrFail(phase1, "before the drain")
	target.Store(b.addr)
	if err := a.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// A drains (GOAWAY, in-flight calls answered) and exits cleanly.
	if err := a.waitExit(t, 90*time.Second); err != nil {
		t.Fatalf("A exited with %v:\n%s", err, a.transcript())
	}
	phase2At.Store(ok.Load() + 300)
	waitOrFail(phase2, "after the drain")
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a call failed: %v", err)
	}
	st := c.Stats()
	t.Logf("%d calls; stats %+v; connections to B %d", ok.Load(), st, dialsB.Load())
	if st.GoAways < 1 || dialsB.Load() < 1 || st.Connections < 3 {
		t.Fatalf("stats %+v, connections to B %d: want a GOAWAY from A and new connections to B", st, dialsB.Load())
	}
}

func TestServerTooManyConnections(t *testing.T) {
	s := needServer(t)
	dir := t.TempDir()
	config := map[string]any{
		"tls":          map[string]any{"certificate": filepath.Join(s.dataDir, "cert.pem"), "private_key": filepath.Join(s.dataDir, "key.pem")},
		"api_key_file": filepath.Join(s.dataDir, "api-keys.json"),
		"data_dir":     filepath.Join(dir, "data"),
		"limits":       map[string]any{"max_connections_per_key": 1},
	}
	data, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	x := startExtraServer(t, filepath.Join(dir, "data"), "--config", path)
	x.mu.Lock()
	x.apiKey, x.caFile = s.apiKey, s.caFile
	x.mu.Unlock()

	holder := clientFor(t, x, Config{Connections: 1})
	if _, err := holder.Ping(testContext(t), nil); err != nil {
		t.Fatal(err)
	}
	other := clientFor(t, x, Config{Connections: 1, MaxAttempts: 2, BackoffInitial: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	_, err = other.Ping(testContext(t), nil)
	e := expectStatus(t, err, Unavailable, ReasonTooManyConnections)
	if !errors.Is(err, ErrTooManyConnections) || errors.Is(err, ErrAPIKeyRefused) || e.Processing != NotProcessed {
		t.Fatalf("got %+v", e)
	}
	if strings.Contains(err.Error(), s.apiKey) {
		t.Fatal("the error contains the API key")
	}
	// Not final: once the other connection is closed, the key gets one again.
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := other.Ping(testContext(t), nil)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrTooManyConnections) || time.Now().After(deadline) {
			t.Fatalf("after the other connection closed: %v", err)
		}
	}
}

// writePEM writes one PEM block to dir/name and returns its path.
func writePEM(t *testing.T, dir, name, blockType string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestServerMutualTLS(t *testing.T) {
	s := needServer(t)
	dir := t.TempDir()
	// A CA for client certificates, and one client certificate it signed.
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "go client test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(crand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	clientKey, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	clientDER, err := x509.CreateCertificate(crand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "orders backend"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caCert, &clientKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	clientKeyDER, err := x509.MarshalPKCS8PrivateKey(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := writePEM(t, dir, "clients-ca.pem", "CERTIFICATE", caDER)
	certFile := writePEM(t, dir, "client.pem", "CERTIFICATE", clientDER)
	keyFile := writePEM(t, dir, "client-key.pem", "PRIVATE KEY", clientKeyDER)

	config, err := json.Marshal(map[string]any{
		"tls": map[string]any{
			"certificate": filepath.Join(s.dataDir, "cert.pem"), "private_key": filepath.Join(s.dataDir, "key.pem"),
			"client_ca": caFile, "client_auth": "require",
		},
		"api_key_file": filepath.Join(s.dataDir, "api-keys.json"),
		"data_dir":     filepath.Join(dir, "data"),
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, config, 0o600); err != nil {
		t.Fatal(err)
	}
	x := startExtraServer(t, filepath.Join(dir, "data"), "--config", path)
	x.mu.Lock()
	x.apiKey, x.caFile = s.apiKey, s.caFile
	x.mu.Unlock()

	with := clientFor(t, x, Config{ClientCertFile: certFile, ClientKeyFile: keyFile})
	if reply, err := with.Ping(testContext(t), &pb.PingRequest{Payload: []byte("mtls")}); err != nil || string(reply.Payload) != "mtls" {
		t.Fatalf("with a client certificate: %v, %v", reply, err)
	}
	without := clientFor(t, x, Config{MaxAttempts: 2, BackoffInitial: 10 * time.Millisecond})
	_, err = without.Ping(testContext(t), nil)
	t.Logf("without a client certificate: %v", err)
	var e *Error
	// TLS 1.3 ends the handshake on the client's side before the server
	// checks the certificate: the refusal comes as an alert, or as a reset
	// that loses it, while HELLO or the call is written.
	if !errors.As(err, &e) || e.Status != Unavailable || errors.Is(err, ErrAPIKeyRefused) {
		t.Fatalf("without a client certificate: %v", err)
	}
}

func TestServerAdminAPI(t *testing.T) {
	admin := sharedAdmin(t)
	ctx := testContext(t)
	app := uid("go.app")

	created, err := admin.CreateApp(ctx, &adminpb.CreateAppRequest{
		AppId: proto.String(app), BundleId: proto.String("com.example." + strings.ReplaceAll(app, "-", "")),
		QueueCapacity: proto.Uint32(1000), Quotas: &adminpb.Quotas{CallsPerSecond: proto.Float64(100)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if created.App.GetAppId() != app || !created.App.GetEnabled() || created.App.GetOwner() != "admin" || created.App.GetQueueCapacity() != 1000 {
		t.Fatalf("created %v", created)
	}
	_, err = admin.CreateApp(ctx, &adminpb.CreateAppRequest{AppId: proto.String(app), BundleId: proto.String("com.example.x")})
	expectStatus(t, err, AlreadyExists, "")
	_, err = admin.CreateApp(ctx, &adminpb.CreateAppRequest{AppId: proto.String(uid("go.bad")), BundleId: proto.String(".bad bundle")})
	e := expectInvalid(t, err)
	if len(e.FieldViolations) == 0 || e.FieldViolations[0].Field != "bundle_id" {
		t.Fatalf("field violations %+v", e.FieldViolations)
	}
	_, err = admin.GetApp(ctx, &adminpb.GetAppRequest{AppId: proto.String(uid("go.none"))})
	expectStatus(t, err, NotFound, "")

	got, err := admin.GetApp(ctx, &adminpb.GetAppRequest{AppId: proto.String(app)})
	if err != nil || got.App.GetBundleId() != created.App.GetBundleId() {
		t.Fatalf("get: %v, %v", got, err)
	}
	updated, err := admin.UpdateApp(ctx, &adminpb.UpdateAppRequest{AppId: proto.String(app), QueueCapacity: proto.Uint32(2000)})
	if err != nil || updated.App.GetQueueCapacity() != 2000 || updated.App.GetBundleId() != created.App.GetBundleId() {
		t.Fatalf("update: %v, %v", updated, err)
	}
	listed := false
	for pageToken := ""; ; {
		page, err := admin.ListApps(ctx, &adminpb.ListAppsRequest{PageSize: proto.Uint32(1000), PageToken: optional(pageToken)})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page.Apps {
			listed = listed || a.GetAppId() == app
		}
		if pageToken = page.GetNextPageToken(); pageToken == "" {
			break
		}
	}
	if !listed {
		t.Fatalf("app %s not listed", app)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	withCredentials, err := admin.PutAPNsCredentials(ctx, &adminpb.PutAPNsCredentialsRequest{
		AppId: proto.String(app), TeamId: proto.String("ABCDE12345"), KeyId: proto.String("KEY1234567"),
		PrivateKeyPem: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), Endpoint: proto.String("apple"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if cr := withCredentials.App.GetCredentials(); cr.GetTeamId() != "ABCDE12345" || cr.GetKeySource() != "registry" || cr.GetEndpoint() != "apple" {
		t.Fatalf("credentials %v", cr)
	}

	minted, err := admin.CreateAPIKey(ctx, &adminpb.CreateAPIKeyRequest{
		AppIds: []string{app}, AllowedMethods: []string{"Ping", "RegisterToken"}, Label: proto.String("go client test"),
	})
	if err != nil {
		t.Fatal(err)
	}
	keyID := minted.Key.GetKeyId()
	if !strings.HasPrefix(minted.GetSecret(), "lrk_"+keyID+"_") {
		t.Fatalf("minted key id %q", keyID)
	}
	keys, err := admin.ListAPIKeys(ctx, &adminpb.ListAPIKeysRequest{AppId: proto.String(app)})
	if err != nil || len(keys.Keys) != 1 || keys.Keys[0].GetKeyId() != keyID || keys.Keys[0].GetAdmin() {
		t.Fatalf("keys: %v, %v", keys, err)
	}
	revoked, err := admin.RevokeAPIKey(ctx, &adminpb.RevokeAPIKeyRequest{KeyId: proto.String(keyID)})
	if err != nil || revoked.Key.GetRevokedAtMs() == 0 {
		t.Fatalf("revoke: %v, %v", revoked, err)
	}
	stats, err := admin.GetAppStats(ctx, &adminpb.GetAppStatsRequest{AppId: proto.String(app)})
	// The node's own figures (its queue) follow its registry poll; the id does not.
	if err != nil || stats.GetAppId() != app {
		t.Fatalf("stats: %v, %v", stats, err)
	}
	disabled, err := admin.DisableApp(ctx, &adminpb.DisableAppRequest{AppId: proto.String(app)})
	if err != nil || disabled.App.GetEnabled() {
		t.Fatalf("disable: %v, %v", disabled, err)
	}
	// An admin key calls the admin API only.
	_, err = admin.Ping(ctx, nil)
	expectStatus(t, err, PermissionDenied, "")
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func TestServerRevokedKey(t *testing.T) {
	s := needServer(t)
	admin := sharedAdmin(t)
	ctx := testContext(t)
	minted, err := admin.CreateAPIKey(ctx, &adminpb.CreateAPIKeyRequest{
		AppIds: []string{devApp}, AllowedMethods: []string{"Ping"}, Label: proto.String("go client revocation test"),
	})
	if err != nil {
		t.Fatal(err)
	}
	secret := minted.GetSecret()
	tenant := untilAccepted(t, s, secret, func(c *Client) error {
		_, err := c.Ping(ctx, nil)
		return err
	})
	if _, err := admin.RevokeAPIKey(ctx, &adminpb.RevokeAPIKeyRequest{KeyId: proto.String(minted.Key.GetKeyId())}); err != nil {
		t.Fatal(err)
	}
	// The open connection gets GOAWAY UNAUTHENTICATED once the server applies
	// the revocation (its registry poll); calls until then succeed.
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err = tenant.Ping(ctx, nil)
		if err != nil || time.Now().After(deadline) {
			break
		}
		// Polling: nothing tells the test when the server reloads its registry.
		time.Sleep(20 * time.Millisecond)
	}
	e := expectStatus(t, err, Unauthenticated, ReasonAPIKeyRevoked)
	if !errors.Is(err, ErrAPIKeyRevoked) || !errors.Is(err, ErrAPIKeyRefused) || errors.Is(err, ErrTooManyConnections) || e.Retryable() {
		t.Fatalf("got %+v", e)
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatal("the error contains the key")
	}
	// Final for this client: no new connection is tried.
	attempts := tenant.Stats().ConnectAttempts
	if _, err := tenant.Ping(ctx, nil); !errors.Is(err, ErrAPIKeyRevoked) {
		t.Fatalf("after the revocation: %v", err)
	}
	if tenant.Stats().ConnectAttempts != attempts {
		t.Fatal("a refused key was tried again")
	}
	// A new client with the key is refused at HELLO.
	fresh := clientFor(t, s, Config{APIKey: secret})
	_, err = fresh.Ping(ctx, nil)
	expectStatus(t, err, Unauthenticated, ReasonAPIKeyRefused)
	if errors.Is(err, ErrAPIKeyRevoked) {
		t.Fatal("a client that never had the key accepted reports a revocation")
	}
}
