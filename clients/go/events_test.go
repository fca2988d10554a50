package liverelay

// ListEvents and TailEvents, the app's event feed, against the shared server.
// The events come from dev.app, whose pushes the development server's
// in-process mock APNs delivers. Other tests share that app, so each test
// first reads the feed to its end and looks only at what comes after, and at
// its own activities' events.

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/liverelay/liverelay/clients/go/adminpb"
	pb "github.com/liverelay/liverelay/clients/go/liverelaypb"
	"google.golang.org/protobuf/proto"
)

// feedEnd is the cursor after the last event the feed holds now.
func feedEnd(t *testing.T, c *Client) uint64 {
	t.Helper()
	var cursor uint64
	for {
		page, err := c.ListEvents(testContext(t), &pb.ListEventsRequest{AppId: devApp, AfterCursor: cursor, MaxEvents: 1000})
		if err != nil {
			t.Fatal(err)
		}
		cursor = page.NextCursor
		if !page.More {
			return cursor
		}
	}
}

// eventsAfter is every event of dev.app after cursor.
func eventsAfter(t *testing.T, c *Client, cursor uint64) []*pb.Event {
	t.Helper()
	var events []*pb.Event
	for {
		page, err := c.ListEvents(testContext(t), &pb.ListEventsRequest{AppId: devApp, AfterCursor: cursor, MaxEvents: 1000})
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, page.Events...)
		cursor = page.NextCursor
		if !page.More {
			return events
		}
	}
}

func eventsOf(activity string, events []*pb.Event) []*pb.Event {
	var mine []*pb.Event
	for _, e := range events {
		if e.ActivityId == activity {
			mine = append(mine, e)
		}
	}
	return mine
}

// waitForEvents is the activity's events after cursor once there are count
// of them (bounded: a missing event fails the test).
func waitForEvents(t *testing.T, c *Client, cursor uint64, activity string, count int) []*pb.Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		mine := eventsOf(activity, eventsAfter(t, c, cursor))
		if len(mine) >= count {
			return mine
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events of %s, want %d: %v", len(mine), activity, count, mine)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startDelivered starts an activity through a new push-to-start token and
// waits for its delivery.
func startDelivered(t *testing.T, c *Client, activity string) *pb.StartActivityReply {
	t.Helper()
	tok := token()
	registerPushToStart(t, c, tok)
	req := startOf(activity, tok)
	req.WaitForDelivery = proto.Bool(true)
	started, err := c.StartActivity(testContext(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return started
}

func endActivity(t *testing.T, c *Client, activity string) {
	t.Helper()
	ended, err := c.EndActivity(testContext(t), &pb.EndActivityRequest{AppId: proto.String(devApp), ActivityId: proto.String(activity)})
	if err != nil {
		t.Fatal(err)
	}
	if ended.State != pb.ActivityState_ACTIVITY_STATE_ENDED {
		t.Fatalf("ended %v", ended)
	}
}

func kinds(events []*pb.Event) []pb.EventKind {
	out := make([]pb.EventKind, len(events))
	for i, e := range events {
		out[i] = e.Kind
	}
	return out
}

func inCursorOrder(events []*pb.Event) bool {
	return sort.SliceIsSorted(events, func(i, j int) bool { return events[i].Cursor < events[j].Cursor }) && distinct(events)
}

func distinct(events []*pb.Event) bool {
	seen := map[uint64]bool{}
	for _, e := range events {
		if seen[e.Cursor] {
			return false
		}
		seen[e.Cursor] = true
	}
	return true
}

var settledThenEnded = []pb.EventKind{pb.EventKind_EVENT_KIND_CALL_SETTLED, pb.EventKind_EVENT_KIND_ACTIVITY_ENDED}

func firstKinds(events []*pb.Event, n int) []pb.EventKind {
	if len(events) > n {
		events = events[:n]
	}
	return kinds(events)
}

func sameKinds(a, b []pb.EventKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestServerEventsSettledAndEnded(t *testing.T) {
	s := needServer(t)
	c := clientFor(t, s, Config{})
	base := feedEnd(t, c)
	activity := uid("go-events")
	tok := token()
	registerPushToStart(t, c, tok)
	req := startOf(activity, tok)
	req.WaitForDelivery = proto.Bool(true)
	started, err := c.StartActivity(testContext(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if started.Summary.GetDelivered() != 1 || !started.Summary.GetComplete() {
		t.Fatalf("started %v", started)
	}
	settled := waitForEvents(t, c, base, activity, 1)[0]
	if settled.Kind != pb.EventKind_EVENT_KIND_CALL_SETTLED || settled.Cursor <= base || settled.CallTimestamp != started.Timestamp ||
		settled.IdempotencyKey != req.GetIdempotencyKey() {
		t.Fatalf("settled %v (base %d, call timestamp %d, key %s)", settled, base, started.Timestamp, req.GetIdempotencyKey())
	}
	if a := settled.Account; a == nil || a.GetTargeted() != 1 || a.GetDelivered() != 1 || !a.GetComplete() || a.GetQueued() != 0 {
		t.Fatalf("account %v", settled.Account)
	}

	endActivity(t, c, activity)
	mine := waitForEvents(t, c, base, activity, 2)
	if !sameKinds(firstKinds(mine, 2), settledThenEnded) {
		t.Fatalf("kinds %v", kinds(mine))
	}
	if ended := mine[1]; ended.ActivityState != pb.ActivityState_ACTIVITY_STATE_ENDED || ended.Cursor <= settled.Cursor || ended.Account != nil {
		t.Fatalf("ended %v", ended)
	}
}

func TestServerEventsPagesOfOne(t *testing.T) {
	s := needServer(t)
	c := clientFor(t, s, Config{})
	base := feedEnd(t, c)
	activity := uid("go-events")
	startDelivered(t, c, activity)
	// The start's settling is recorded as the call settles, after its reply: wait for it, so
	// that the end's event follows it in the feed.
	waitForEvents(t, c, base, activity, 1)
	endActivity(t, c, activity)
	waitForEvents(t, c, base, activity, 2)

	var seen []*pb.Event
	var mores []bool
	cursor := base
	for {
		page, err := c.ListEvents(testContext(t), &pb.ListEventsRequest{AppId: devApp, AfterCursor: cursor, MaxEvents: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) != 1 || page.NextCursor != page.Events[0].Cursor {
			t.Fatalf("page %v", page)
		}
		seen = append(seen, page.Events...)
		mores = append(mores, page.More)
		cursor = page.NextCursor
		if !page.More {
			break
		}
		if len(seen) > 1000 {
			t.Fatal("the feed never ended")
		}
	}
	if len(seen) < 2 || !inCursorOrder(seen) || seen[0].Cursor <= base {
		t.Fatalf("pages %v", seen)
	}
	for i, more := range mores[:len(mores)-1] {
		if !more {
			t.Fatalf("page %d of %d says no more", i+1, len(mores))
		}
	}
	if mine := eventsOf(activity, seen); !sameKinds(firstKinds(mine, 2), settledThenEnded) {
		t.Fatalf("kinds %v", kinds(mine))
	}
}

// pollAcrossAStart begins a long poll of 10 s after base, starts an activity
// through starter once the poll has (most likely) reached the server, and
// returns the poll's outcome.
func pollAcrossAStart(t *testing.T, poller, starter *Client, base uint64, pause time.Duration) (*pb.ListEventsReply, string, error) {
	t.Helper()
	type outcome struct {
		reply *pb.ListEventsReply
		err   error
	}
	done := make(chan outcome, 1)
	go func() {
		// No deadline on the context: the client's default timeout plus the wait governs.
		reply, err := poller.ListEvents(context.Background(), &pb.ListEventsRequest{AppId: devApp, AfterCursor: base, WaitMs: 10000})
		done <- outcome{reply, err}
	}()
	time.Sleep(pause)
	activity := uid("go-poll")
	startDelivered(t, starter, activity)
	select {
	case o := <-done:
		return o.reply, activity, o.err
	case <-time.After(30 * time.Second):
		t.Fatal("the poll never returned")
		return nil, "", nil
	}
}

func TestServerEventsLongPollReturnsTheEventThatComes(t *testing.T) {
	s := needServer(t)
	c := clientFor(t, s, Config{})
	base := feedEnd(t, c)
	reply, activity, err := pollAcrossAStart(t, c, c, base, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(reply.Events) == 0 || reply.NextCursor != reply.Events[len(reply.Events)-1].Cursor || reply.NextCursor <= base {
		t.Fatalf("reply %v", reply)
	}
	if e := reply.Events[0]; e.Kind != pb.EventKind_EVENT_KIND_CALL_SETTLED || e.ActivityId != activity || e.Account.GetDelivered() != 1 {
		t.Fatalf("event %v, want the settling of %s", e, activity)
	}
}

// A context without a deadline gets the default timeout plus the wait: a
// poll still waiting when the default timeout has passed gets the event.
func TestServerEventsDefaultTimeoutCoversTheWait(t *testing.T) {
	s := needServer(t)
	c := clientFor(t, s, Config{DefaultTimeout: time.Second})
	base := feedEnd(t, c)
	reply, activity, err := pollAcrossAStart(t, c, clientFor(t, s, Config{}), base, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(reply.Events) == 0 || reply.Events[0].ActivityId != activity {
		t.Fatalf("reply %v, want the settling of %s", reply, activity)
	}
}

func TestServerEventsEmptyPollKeepsTheCursor(t *testing.T) {
	s := needServer(t)
	c := clientFor(t, s, Config{})
	base := feedEnd(t, c)
	for _, wait := range []uint32{200, 0} {
		reply, err := c.ListEvents(testContext(t), &pb.ListEventsRequest{AppId: devApp, AfterCursor: base, WaitMs: wait})
		if err != nil {
			t.Fatal(err)
		}
		if len(reply.Events) != 0 || reply.NextCursor != base || reply.More {
			t.Fatalf("wait %d ms: reply %v, want none and next cursor %d", wait, reply, base)
		}
	}
}

func TestServerEventsRefusals(t *testing.T) {
	s := needServer(t)
	admin := sharedAdmin(t)
	ctx := testContext(t)
	other := uid("go.events")
	if _, err := admin.CreateApp(ctx, &adminpb.CreateAppRequest{AppId: proto.String(other), BundleId: proto.String("com.example.goevents")}); err != nil {
		t.Fatal(err)
	}
	c := clientFor(t, s, Config{})
	_, err := c.ListEvents(ctx, &pb.ListEventsRequest{AppId: other})
	expectStatus(t, err, PermissionDenied, "")
	_, err = c.ListEvents(ctx, &pb.ListEventsRequest{AppId: devApp, MaxEvents: 1001})
	if e := expectInvalid(t, err); len(e.FieldViolations) != 1 || e.FieldViolations[0].Field != "max_events" {
		t.Fatalf("field violations %+v", e.FieldViolations)
	}
	if _, err := c.ListEvents(ctx, nil); err == nil {
		t.Fatal("a nil request was sent")
	}
}

func TestServerTailEvents(t *testing.T) {
	s := needServer(t)
	c := clientFor(t, s, Config{})
	base := feedEnd(t, c)
	activity := uid("go-tail")
	found := errors.New("found")
	var collected []*pb.Event
	done := make(chan error, 1)
	tailCtx := testContext(t)
	go func() {
		done <- c.TailEvents(tailCtx, devApp, base, func(e *pb.Event) error {
			collected = append(collected, e)
			if sameKinds(kinds(eventsOf(activity, collected)), settledThenEnded) {
				return found
			}
			return nil
		})
	}()
	time.Sleep(300 * time.Millisecond)
	starter := clientFor(t, s, Config{})
	startDelivered(t, starter, activity)
	waitForEvents(t, starter, base, activity, 1) // the start's settling, recorded after its reply
	endActivity(t, starter, activity)
	select {
	case err := <-done:
		if err != found {
			t.Fatalf("TailEvents returned %v, want fn's error", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("TailEvents never saw the activity's events")
	}
	if !inCursorOrder(collected) || collected[0].Cursor <= base {
		t.Fatalf("collected %v", collected)
	}
	if want := eventsAfter(t, c, base); len(want) < len(collected) || !sameKinds(kinds(want[:len(collected)]), kinds(collected)) {
		t.Fatalf("tail %v, feed %v", collected, want)
	}

	// It ends when its context does, with the context's error, also in the middle of a poll.
	ctx, cancel := context.WithCancel(context.Background())
	end := feedEnd(t, c)
	go func() { done <- c.TailEvents(ctx, devApp, end, func(*pb.Event) error { return nil }) }()
	time.Sleep(300 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("TailEvents returned %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("TailEvents did not end with its context")
	}
}
