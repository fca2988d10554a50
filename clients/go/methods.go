package liverelay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/liverelay/liverelay/clients/go/adminpb"
	pb "github.com/liverelay/liverelay/clients/go/liverelaypb"
	"google.golang.org/protobuf/proto"
)

// The method paths of liverelay.v1.LiveRelay and liverelay.admin.v1.Admin
// (docs/PROTOCOL.md, sections 3.5 and 15).
const (
	MethodRegisterToken  = "/liverelay.v1.LiveRelay/RegisterToken"
	MethodStartActivity  = "/liverelay.v1.LiveRelay/StartActivity"
	MethodUpdateActivity = "/liverelay.v1.LiveRelay/UpdateActivity"
	MethodEndActivity    = "/liverelay.v1.LiveRelay/EndActivity"
	MethodPing           = "/liverelay.v1.LiveRelay/Ping"
	MethodCreateChannel  = "/liverelay.v1.LiveRelay/CreateChannel"
	MethodListChannels   = "/liverelay.v1.LiveRelay/ListChannels"
	MethodDeleteChannel  = "/liverelay.v1.LiveRelay/DeleteChannel"
	MethodListEvents     = "/liverelay.v1.LiveRelay/ListEvents"

	MethodCreateApp          = "/liverelay.admin.v1.Admin/CreateApp"
	MethodUpdateApp          = "/liverelay.admin.v1.Admin/UpdateApp"
	MethodGetApp             = "/liverelay.admin.v1.Admin/GetApp"
	MethodListApps           = "/liverelay.admin.v1.Admin/ListApps"
	MethodDisableApp         = "/liverelay.admin.v1.Admin/DisableApp"
	MethodPutAPNsCredentials = "/liverelay.admin.v1.Admin/PutAPNsCredentials"
	MethodCreateAPIKey       = "/liverelay.admin.v1.Admin/CreateAPIKey"
	MethodListAPIKeys        = "/liverelay.admin.v1.Admin/ListAPIKeys"
	MethodRevokeAPIKey       = "/liverelay.admin.v1.Admin/RevokeAPIKey"
	MethodGetAppStats        = "/liverelay.admin.v1.Admin/GetAppStats"
	MethodPutWebhook         = "/liverelay.admin.v1.Admin/PutWebhook"
	MethodGetWebhook         = "/liverelay.admin.v1.Admin/GetWebhook"
	MethodDeleteWebhook      = "/liverelay.admin.v1.Admin/DeleteWebhook"
	MethodResetWebhook       = "/liverelay.admin.v1.Admin/ResetWebhook"
)

// CallOption changes how Invoke treats one call.
type CallOption interface{ apply(*callOptions) }

type callOptions struct{ idempotent bool }

type optionFunc func(*callOptions)

func (f optionFunc) apply(o *callOptions) { f(o) }

// Idempotent tells Invoke that sending the call twice has the effect of
// sending it once, so it may be resent when its fate is unknown.
func Idempotent() CallOption { return optionFunc(func(o *callOptions) { o.idempotent = true }) }

// Invoke calls any method by its path, for methods this version of the
// package has no typed method for. The typed methods are Invoke with the
// right messages and retry policy.
func (c *Client) Invoke(ctx context.Context, method string, req, reply proto.Message, opts ...CallOption) error {
	var o callOptions
	for _, opt := range opts {
		opt.apply(&o)
	}
	return c.invoke(ctx, method, req, reply, o.idempotent)
}

// NewIdempotencyKey returns a fresh random idempotency key (32 hex digits).
func NewIdempotencyKey() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on supported systems; a key that could
		// repeat would make the server replay another call's reply.
		panic("liverelay: no randomness for an idempotency key: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

func nilRequest(what string) error {
	return localError(InvalidArgument, NotProcessed, "nil "+what, nil)
}

// RegisterToken registers, rotates or removes one push token. It is
// idempotent by nature, so it is resent after a lost connection.
func (c *Client) RegisterToken(ctx context.Context, req *pb.RegisterTokenRequest) (*pb.RegisterTokenReply, error) {
	if req == nil {
		return nil, nilRequest("RegisterTokenRequest")
	}
	reply := new(pb.RegisterTokenReply)
	if err := c.invoke(ctx, MethodRegisterToken, req, reply, true); err != nil {
		return nil, err
	}
	return reply, nil
}

// StartActivity starts an activity through push-to-start tokens.
//
// When req.IdempotencyKey is unset it is set to a fresh key (NewIdempotencyKey)
// before the first attempt, so the call can be resent safely, by the client
// after a lost connection or an OutcomeUnknown answer, and by the caller
// with the same request afterwards (the server replays the first reply,
// Replayed true). The request is not otherwise changed.
func (c *Client) StartActivity(ctx context.Context, req *pb.StartActivityRequest) (*pb.StartActivityReply, error) {
	if req == nil {
		return nil, nilRequest("StartActivityRequest")
	}
	if req.IdempotencyKey == nil {
		req.IdempotencyKey = proto.String(NewIdempotencyKey())
	}
	reply := new(pb.StartActivityReply)
	if err := c.invoke(ctx, MethodStartActivity, req, reply, true); err != nil {
		return nil, err
	}
	return reply, nil
}

// UpdateActivity sends a new content state to an activity. Its idempotency
// key is handled as StartActivity's.
func (c *Client) UpdateActivity(ctx context.Context, req *pb.UpdateActivityRequest) (*pb.UpdateActivityReply, error) {
	if req == nil {
		return nil, nilRequest("UpdateActivityRequest")
	}
	if req.IdempotencyKey == nil {
		req.IdempotencyKey = proto.String(NewIdempotencyKey())
	}
	reply := new(pb.UpdateActivityReply)
	if err := c.invoke(ctx, MethodUpdateActivity, req, reply, true); err != nil {
		return nil, err
	}
	return reply, nil
}

// EndActivity ends an activity on every device. Its idempotency key is
// handled as StartActivity's.
func (c *Client) EndActivity(ctx context.Context, req *pb.EndActivityRequest) (*pb.EndActivityReply, error) {
	if req == nil {
		return nil, nilRequest("EndActivityRequest")
	}
	if req.IdempotencyKey == nil {
		req.IdempotencyKey = proto.String(NewIdempotencyKey())
	}
	reply := new(pb.EndActivityReply)
	if err := c.invoke(ctx, MethodEndActivity, req, reply, true); err != nil {
		return nil, err
	}
	return reply, nil
}

// Ping checks the whole path: TLS, the API key and the service.
func (c *Client) Ping(ctx context.Context, req *pb.PingRequest) (*pb.PingReply, error) {
	if req == nil {
		req = &pb.PingRequest{}
	}
	reply := new(pb.PingReply)
	if err := c.invoke(ctx, MethodPing, req, reply, true); err != nil {
		return nil, err
	}
	return reply, nil
}

// CreateChannel creates a broadcast channel with APNs. It carries no
// idempotency key, so it is not resent when its fate is unknown: list the
// channels first to see whether it was made.
func (c *Client) CreateChannel(ctx context.Context, req *pb.CreateChannelRequest) (*pb.CreateChannelReply, error) {
	if req == nil {
		return nil, nilRequest("CreateChannelRequest")
	}
	reply := new(pb.CreateChannelReply)
	if err := c.invoke(ctx, MethodCreateChannel, req, reply, false); err != nil {
		return nil, err
	}
	return reply, nil
}

// ListChannels returns one page of the app's channels.
func (c *Client) ListChannels(ctx context.Context, req *pb.ListChannelsRequest) (*pb.ListChannelsReply, error) {
	if req == nil {
		return nil, nilRequest("ListChannelsRequest")
	}
	reply := new(pb.ListChannelsReply)
	if err := c.invoke(ctx, MethodListChannels, req, reply, true); err != nil {
		return nil, err
	}
	return reply, nil
}

// DeleteChannel deletes a channel at APNs and in the server's store. A
// repeat of a deletion that took effect is NOT_FOUND, so it is not resent
// when its fate is unknown.
func (c *Client) DeleteChannel(ctx context.Context, req *pb.DeleteChannelRequest) (*pb.DeleteChannelReply, error) {
	if req == nil {
		return nil, nilRequest("DeleteChannelRequest")
	}
	reply := new(pb.DeleteChannelReply)
	if err := c.invoke(ctx, MethodDeleteChannel, req, reply, false); err != nil {
		return nil, err
	}
	return reply, nil
}

// ListEvents returns the app's events after req.AfterCursor (0: from the
// oldest the feed keeps), in cursor order: what became of its calls after
// their replies. The next call's AfterCursor is the reply's NextCursor; More
// says the page was full (MaxEvents: 0 for 100, at most 1000). It is
// read-only, so it is resent when its fate is unknown.
//
// With WaitMs (at most 60000) and nothing after the cursor, the server holds
// the call until an event comes or the wait ends, then answers with no events
// and NextCursor unchanged: a long poll. The context's deadline governs, and
// must leave room for the wait; a context without a deadline gets
// Config.DefaultTimeout plus WaitMs, so the default does not cut the wait
// short. A cursor older than the feed keeps fails with FAILED_PRECONDITION,
// reason CursorExpired: its events were deleted, read again from 0.
func (c *Client) ListEvents(ctx context.Context, req *pb.ListEventsRequest) (*pb.ListEventsReply, error) {
	if req == nil {
		return nil, nilRequest("ListEventsRequest")
	}
	if _, ok := ctx.Deadline(); !ok && c.cfg.DefaultTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.DefaultTimeout+time.Duration(req.WaitMs)*time.Millisecond)
		defer cancel()
	}
	reply := new(pb.ListEventsReply)
	if err := c.invoke(ctx, MethodListEvents, req, reply, true); err != nil {
		return nil, err
	}
	return reply, nil
}

// tailWait is how long each long poll of TailEvents waits for an event.
const tailWait = 30 * time.Second

// TailEvents calls fn with every event of the app after afterCursor, in
// cursor order, until ctx is done or a call or fn fails: ListEvents long
// polls of 30 s in a loop, each after the last event passed to fn. It
// returns fn's error as it is, the ListEvents error (a *Error), or ctx's
// error once ctx is done. Each poll's deadline is ctx's, or without one
// Config.DefaultTimeout plus the 30 s. Keep the last event's Cursor to go on
// from there later.
func (c *Client) TailEvents(ctx context.Context, appID string, afterCursor uint64, fn func(*pb.Event) error) error {
	cursor := afterCursor
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := c.ListEvents(ctx, &pb.ListEventsRequest{
			AppId: appID, AfterCursor: cursor, WaitMs: uint32(tailWait / time.Millisecond),
		})
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return err
		}
		for _, event := range page.Events {
			if err := fn(event); err != nil {
				return err
			}
		}
		cursor = page.NextCursor
	}
}

// The admin API (liverelay.admin.v1.Admin), for clients made with an admin
// key. Changes are not resent when their fate is unknown (UNAVAILABLE,
// OutcomeUnknown): read the registry back first, as a repeated CreateAPIKey
// would mint a second key.

// CreateApp creates an app in the tenant registry.
func (c *Client) CreateApp(ctx context.Context, req *adminpb.CreateAppRequest) (*adminpb.AppReply, error) {
	return adminCall(ctx, c, MethodCreateApp, req, new(adminpb.AppReply), false)
}

// UpdateApp changes the fields the request sets.
func (c *Client) UpdateApp(ctx context.Context, req *adminpb.UpdateAppRequest) (*adminpb.AppReply, error) {
	return adminCall(ctx, c, MethodUpdateApp, req, new(adminpb.AppReply), false)
}

// GetApp reads one app.
func (c *Client) GetApp(ctx context.Context, req *adminpb.GetAppRequest) (*adminpb.AppReply, error) {
	return adminCall(ctx, c, MethodGetApp, req, new(adminpb.AppReply), true)
}

// ListApps returns one page of apps, in id order.
func (c *Client) ListApps(ctx context.Context, req *adminpb.ListAppsRequest) (*adminpb.ListAppsReply, error) {
	return adminCall(ctx, c, MethodListApps, req, new(adminpb.ListAppsReply), true)
}

// DisableApp refuses the app's calls from now on (FAILED_PRECONDITION, AppDisabled).
func (c *Client) DisableApp(ctx context.Context, req *adminpb.DisableAppRequest) (*adminpb.AppReply, error) {
	return adminCall(ctx, c, MethodDisableApp, req, new(adminpb.AppReply), false)
}

// PutAPNsCredentials sets the app's APNs signing key and endpoint.
func (c *Client) PutAPNsCredentials(ctx context.Context, req *adminpb.PutAPNsCredentialsRequest) (*adminpb.AppReply, error) {
	return adminCall(ctx, c, MethodPutAPNsCredentials, req, new(adminpb.AppReply), false)
}

// CreateAPIKey mints a key; the reply's Secret is the only copy of it.
func (c *Client) CreateAPIKey(ctx context.Context, req *adminpb.CreateAPIKeyRequest) (*adminpb.CreateAPIKeyReply, error) {
	return adminCall(ctx, c, MethodCreateAPIKey, req, new(adminpb.CreateAPIKeyReply), false)
}

// ListAPIKeys returns one page of keys, without their secrets.
func (c *Client) ListAPIKeys(ctx context.Context, req *adminpb.ListAPIKeysRequest) (*adminpb.ListAPIKeysReply, error) {
	return adminCall(ctx, c, MethodListAPIKeys, req, new(adminpb.ListAPIKeysReply), true)
}

// RevokeAPIKey revokes a key on every node: refused at its next HELLO, and
// its open connections get GOAWAY UNAUTHENTICATED.
func (c *Client) RevokeAPIKey(ctx context.Context, req *adminpb.RevokeAPIKeyRequest) (*adminpb.APIKeyReply, error) {
	return adminCall(ctx, c, MethodRevokeAPIKey, req, new(adminpb.APIKeyReply), false)
}

// GetAppStats reports what the answering node sees of the app.
func (c *Client) GetAppStats(ctx context.Context, req *adminpb.GetAppStatsRequest) (*adminpb.AppStats, error) {
	return adminCall(ctx, c, MethodGetAppStats, req, new(adminpb.AppStats), true)
}

// PutWebhook sets the app's webhook. A new webhook, or RotateSecret, mints a
// signing secret: the reply's SigningSecret is the only copy of it.
func (c *Client) PutWebhook(ctx context.Context, req *adminpb.PutWebhookRequest) (*adminpb.PutWebhookReply, error) {
	return adminCall(ctx, c, MethodPutWebhook, req, new(adminpb.PutWebhookReply), false)
}

// GetWebhook reads the app's webhook and its delivery state.
func (c *Client) GetWebhook(ctx context.Context, req *adminpb.GetWebhookRequest) (*adminpb.WebhookReply, error) {
	return adminCall(ctx, c, MethodGetWebhook, req, new(adminpb.WebhookReply), true)
}

// DeleteWebhook stops the app's deliveries; its event feed keeps its events.
func (c *Client) DeleteWebhook(ctx context.Context, req *adminpb.DeleteWebhookRequest) (*adminpb.WebhookReply, error) {
	return adminCall(ctx, c, MethodDeleteWebhook, req, new(adminpb.WebhookReply), false)
}

// ResetWebhook ends a failing or retrying webhook's wait: the next delivery
// is tried at once, with a fresh retry window.
func (c *Client) ResetWebhook(ctx context.Context, req *adminpb.ResetWebhookRequest) (*adminpb.WebhookReply, error) {
	return adminCall(ctx, c, MethodResetWebhook, req, new(adminpb.WebhookReply), false)
}

func adminCall[Req proto.Message, Reply proto.Message](ctx context.Context, c *Client, method string, req Req, reply Reply, idempotent bool) (Reply, error) {
	var zero Reply
	if !req.ProtoReflect().IsValid() {
		return zero, nilRequest(string(req.ProtoReflect().Descriptor().Name()))
	}
	if err := c.invoke(ctx, method, req, reply, idempotent); err != nil {
		return zero, err
	}
	return reply, nil
}
