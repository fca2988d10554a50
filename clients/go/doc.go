// Package liverelay is the Go client of LiveRelay, a Live Activity push
// gateway: typed calls of the liverelay.v1.LiveRelay RPCs (RegisterToken,
// StartActivity, UpdateActivity, EndActivity, Ping, the broadcast channel
// RPCs and ListEvents, the event feed) and of the admin API
// (liverelay.admin.v1.Admin), over LiveRelay's binary protocol
// (docs/PROTOCOL.md in the LiveRelay repository): protobuf messages in
// length-prefixed frames, pipelined on TLS connections.
//
// The messages are the generated types of the liverelaypb and adminpb
// packages. The activity requests are proto2, so their fields are pointers
// (proto.String, proto.Bool, ...): absent and zero differ.
//
//	client, err := liverelay.New(liverelay.Config{
//		Address: "relay.example.com:7443",
//		APIKey:  os.Getenv("LIVERELAY_API_KEY"),
//	})
//	if err != nil { ... }
//	defer client.Close()
//	reply, err := client.UpdateActivity(ctx, &liverelaypb.UpdateActivityRequest{
//		AppId:            proto.String("com.example.app"),
//		ActivityId:       proto.String("order-1"),
//		ContentStateJson: proto.String(`{"status":"on the way"}`),
//	})
//
// A context's deadline is the call's deadline: it is sent to the server
// (which stops work at it) and enforced by the client, which fails the call
// with DEADLINE_EXCEEDED at it and sends CANCEL; cancelling the context
// cancels the call the same way. Errors are *Error values (see Error), and
// Client describes which failures the client resends on its own.
package liverelay
