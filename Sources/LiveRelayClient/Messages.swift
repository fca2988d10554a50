import LiveRelayMessages
import LiveRelayWire

// The messages a caller sends and receives, reachable through `import LiveRelayClient`
// alone. They are LiveRelayMessages' types under their own names (the same types, not
// copies), listed one by one so that the rest of that module (codecs, limits, method
// tables) stays out of the client's surface.

public typealias RegisterTokenRequest = LiveRelayMessages.RegisterTokenRequest
public typealias RegisterTokenReply = LiveRelayMessages.RegisterTokenReply
public typealias RegisterTokenResult = LiveRelayMessages.RegisterTokenResult
public typealias TokenKind = LiveRelayMessages.TokenKind
public typealias Environment = LiveRelayMessages.Environment

public typealias StartActivityRequest = LiveRelayMessages.StartActivityRequest
public typealias StartActivityReply = LiveRelayMessages.StartActivityReply
public typealias UpdateActivityRequest = LiveRelayMessages.UpdateActivityRequest
public typealias UpdateActivityReply = LiveRelayMessages.UpdateActivityReply
public typealias EndActivityRequest = LiveRelayMessages.EndActivityRequest
public typealias EndActivityReply = LiveRelayMessages.EndActivityReply
public typealias Alert = LiveRelayMessages.Alert
public typealias Targets = LiveRelayMessages.Targets
public typealias Priority = LiveRelayMessages.Priority
public typealias ActivityState = LiveRelayMessages.ActivityState
public typealias DeliverySummary = LiveRelayMessages.DeliverySummary
public typealias FailureCount = LiveRelayMessages.FailureCount
public typealias UnresolvedTarget = LiveRelayMessages.UnresolvedTarget
public typealias TargetKind = LiveRelayMessages.TargetKind

public typealias PingRequest = LiveRelayMessages.PingRequest
public typealias PingReply = LiveRelayMessages.PingReply

public typealias CreateChannelRequest = LiveRelayMessages.CreateChannelRequest
public typealias CreateChannelReply = LiveRelayMessages.CreateChannelReply
public typealias ListChannelsRequest = LiveRelayMessages.ListChannelsRequest
public typealias ListChannelsReply = LiveRelayMessages.ListChannelsReply
public typealias DeleteChannelRequest = LiveRelayMessages.DeleteChannelRequest
public typealias DeleteChannelReply = LiveRelayMessages.DeleteChannelReply
public typealias BroadcastChannel = LiveRelayMessages.BroadcastChannel
public typealias BroadcastStoragePolicy = LiveRelayMessages.BroadcastStoragePolicy

public typealias ListEventsRequest = LiveRelayMessages.ListEventsRequest
public typealias ListEventsReply = LiveRelayMessages.ListEventsReply
public typealias Event = LiveRelayMessages.Event
public typealias EventKind = LiveRelayMessages.EventKind

/// The admin API's messages: `Admin.CreateAppRequest`, `Admin.AppReply`, ...
public typealias Admin = LiveRelayMessages.Admin

/// What a failed call says beside its status: field violations, a retry hint, a reason.
public typealias ErrorDetails = LiveRelayMessages.ErrorDetails
public typealias FieldViolation = LiveRelayMessages.FieldViolation
/// Why a request is malformed, as `validate()` on a request throws it.
public typealias MessageError = LiveRelayMessages.MessageError
/// A call's status, the same codes as gRPC's.
public typealias StatusCode = LiveRelayWire.StatusCode
