package liverelay_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	liverelay "github.com/liverelay/liverelay/clients/go"
	"github.com/liverelay/liverelay/clients/go/liverelaypb"
	"google.golang.org/protobuf/proto"
)

// A backend registers a device's push-to-start token, starts a Live
// Activity through it, updates it, and meets an error. It runs against the
// development server the tests start (`liverelay serve`): its address, the
// API key it printed, and its self-signed certificate.
func Example() {
	client, err := liverelay.New(liverelay.Config{
		Address: os.Getenv("LIVERELAY_ADDRESS"), // e.g. "127.0.0.1:7443"
		APIKey:  os.Getenv("LIVERELAY_API_KEY"),
		CAFile:  os.Getenv("LIVERELAY_CA_FILE"), // .liverelay-dev/cert.pem
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The app reports its push-to-start token (64 hex digits from APNs).
	token := randomHex(32)
	if _, err := client.RegisterToken(ctx, &liverelaypb.RegisterTokenRequest{
		AppId:          "dev.app",
		Kind:           liverelaypb.TokenKind_TOKEN_KIND_PUSH_TO_START,
		Token:          token,
		Environment:    liverelaypb.Environment_ENVIRONMENT_SANDBOX,
		AttributesType: "DeliveryAttributes",
	}); err != nil {
		fmt.Println(err)
		return
	}

	// The backend starts the activity and waits for APNs's answer. Without
	// an IdempotencyKey the client sets a fresh one, so a lost connection
	// can be survived by resending.
	activity := "order-" + randomHex(4)
	started, err := client.StartActivity(ctx, &liverelaypb.StartActivityRequest{
		AppId:            proto.String("dev.app"),
		ActivityId:       proto.String(activity),
		AttributesType:   proto.String("DeliveryAttributes"),
		AttributesJson:   proto.String(`{"orderId":1}`),
		ContentStateJson: proto.String(`{"status":"preparing"}`),
		Alert:            &liverelaypb.Alert{Title: proto.String("Order placed")},
		Targets:          &liverelaypb.Targets{PushToStartTokens: []string{token}},
		WaitForDelivery:  proto.Bool(true),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(started.State, "delivered:", started.Summary.GetDelivered())

	// An activity that was never started cannot be updated.
	_, err = client.UpdateActivity(ctx, &liverelaypb.UpdateActivityRequest{
		AppId:            proto.String("dev.app"),
		ActivityId:       proto.String("no-such-" + activity),
		ContentStateJson: proto.String(`{"status":"on the way"}`),
	})
	var e *liverelay.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Reason)
	}
	// Output:
	// ACTIVITY_STATE_STARTING delivered: 1
	// NOT_FOUND ActivityNotFound
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
