from liverelay._proto.liverelay.v1 import activity_pb2 as _activity_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TokenKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOKEN_KIND_UNSPECIFIED: _ClassVar[TokenKind]
    TOKEN_KIND_PUSH_TO_START: _ClassVar[TokenKind]
    TOKEN_KIND_UPDATE: _ClassVar[TokenKind]

class Environment(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENVIRONMENT_UNSPECIFIED: _ClassVar[Environment]
    ENVIRONMENT_SANDBOX: _ClassVar[Environment]
    ENVIRONMENT_PRODUCTION: _ClassVar[Environment]

class RegisterTokenResult(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REGISTER_TOKEN_RESULT_UNSPECIFIED: _ClassVar[RegisterTokenResult]
    REGISTER_TOKEN_RESULT_CREATED: _ClassVar[RegisterTokenResult]
    REGISTER_TOKEN_RESULT_ROTATED: _ClassVar[RegisterTokenResult]
    REGISTER_TOKEN_RESULT_UNCHANGED: _ClassVar[RegisterTokenResult]
    REGISTER_TOKEN_RESULT_REMOVED: _ClassVar[RegisterTokenResult]
    REGISTER_TOKEN_RESULT_NOT_FOUND: _ClassVar[RegisterTokenResult]

class TargetKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TARGET_KIND_UNSPECIFIED: _ClassVar[TargetKind]
    TARGET_KIND_PUSH_TO_START_TOKEN: _ClassVar[TargetKind]
    TARGET_KIND_EXTERNAL_USER_ID: _ClassVar[TargetKind]
    TARGET_KIND_ALL_DEVICES: _ClassVar[TargetKind]

class ActivityState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACTIVITY_STATE_UNSPECIFIED: _ClassVar[ActivityState]
    ACTIVITY_STATE_STARTING: _ClassVar[ActivityState]
    ACTIVITY_STATE_ACTIVE: _ClassVar[ActivityState]
    ACTIVITY_STATE_ENDED: _ClassVar[ActivityState]
    ACTIVITY_STATE_EXPIRED: _ClassVar[ActivityState]
    ACTIVITY_STATE_DISMISSED: _ClassVar[ActivityState]

class ChannelStoragePolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHANNEL_STORAGE_POLICY_UNSPECIFIED: _ClassVar[ChannelStoragePolicy]
    CHANNEL_STORAGE_POLICY_NO_STORAGE: _ClassVar[ChannelStoragePolicy]
    CHANNEL_STORAGE_POLICY_MOST_RECENT_MESSAGE: _ClassVar[ChannelStoragePolicy]

class EventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_KIND_UNSPECIFIED: _ClassVar[EventKind]
    EVENT_KIND_CALL_SETTLED: _ClassVar[EventKind]
    EVENT_KIND_PUSH_FAILED: _ClassVar[EventKind]
    EVENT_KIND_TOKEN_PRUNED: _ClassVar[EventKind]
    EVENT_KIND_ACTIVITY_ENDED: _ClassVar[EventKind]
    EVENT_KIND_DISPATCH_HELD: _ClassVar[EventKind]
    EVENT_KIND_DISPATCH_RESUMED: _ClassVar[EventKind]
    EVENT_KIND_CHANNEL_DELETED: _ClassVar[EventKind]
TOKEN_KIND_UNSPECIFIED: TokenKind
TOKEN_KIND_PUSH_TO_START: TokenKind
TOKEN_KIND_UPDATE: TokenKind
ENVIRONMENT_UNSPECIFIED: Environment
ENVIRONMENT_SANDBOX: Environment
ENVIRONMENT_PRODUCTION: Environment
REGISTER_TOKEN_RESULT_UNSPECIFIED: RegisterTokenResult
REGISTER_TOKEN_RESULT_CREATED: RegisterTokenResult
REGISTER_TOKEN_RESULT_ROTATED: RegisterTokenResult
REGISTER_TOKEN_RESULT_UNCHANGED: RegisterTokenResult
REGISTER_TOKEN_RESULT_REMOVED: RegisterTokenResult
REGISTER_TOKEN_RESULT_NOT_FOUND: RegisterTokenResult
TARGET_KIND_UNSPECIFIED: TargetKind
TARGET_KIND_PUSH_TO_START_TOKEN: TargetKind
TARGET_KIND_EXTERNAL_USER_ID: TargetKind
TARGET_KIND_ALL_DEVICES: TargetKind
ACTIVITY_STATE_UNSPECIFIED: ActivityState
ACTIVITY_STATE_STARTING: ActivityState
ACTIVITY_STATE_ACTIVE: ActivityState
ACTIVITY_STATE_ENDED: ActivityState
ACTIVITY_STATE_EXPIRED: ActivityState
ACTIVITY_STATE_DISMISSED: ActivityState
CHANNEL_STORAGE_POLICY_UNSPECIFIED: ChannelStoragePolicy
CHANNEL_STORAGE_POLICY_NO_STORAGE: ChannelStoragePolicy
CHANNEL_STORAGE_POLICY_MOST_RECENT_MESSAGE: ChannelStoragePolicy
EVENT_KIND_UNSPECIFIED: EventKind
EVENT_KIND_CALL_SETTLED: EventKind
EVENT_KIND_PUSH_FAILED: EventKind
EVENT_KIND_TOKEN_PRUNED: EventKind
EVENT_KIND_ACTIVITY_ENDED: EventKind
EVENT_KIND_DISPATCH_HELD: EventKind
EVENT_KIND_DISPATCH_RESUMED: EventKind
EVENT_KIND_CHANNEL_DELETED: EventKind

class RegisterTokenRequest(_message.Message):
    __slots__ = ("app_id", "kind", "token", "environment", "attributes_type", "activity_id", "external_user_id", "device_id", "expires_at", "remove")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_TYPE_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_ID_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_USER_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    kind: TokenKind
    token: str
    environment: Environment
    attributes_type: str
    activity_id: str
    external_user_id: str
    device_id: str
    expires_at: int
    remove: bool
    def __init__(self, app_id: _Optional[str] = ..., kind: _Optional[_Union[TokenKind, str]] = ..., token: _Optional[str] = ..., environment: _Optional[_Union[Environment, str]] = ..., attributes_type: _Optional[str] = ..., activity_id: _Optional[str] = ..., external_user_id: _Optional[str] = ..., device_id: _Optional[str] = ..., expires_at: _Optional[int] = ..., remove: bool = ...) -> None: ...

class RegisterTokenReply(_message.Message):
    __slots__ = ("result", "replaced_token")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    REPLACED_TOKEN_FIELD_NUMBER: _ClassVar[int]
    result: RegisterTokenResult
    replaced_token: str
    def __init__(self, result: _Optional[_Union[RegisterTokenResult, str]] = ..., replaced_token: _Optional[str] = ...) -> None: ...

class UnresolvedTarget(_message.Message):
    __slots__ = ("kind", "value", "reason")
    KIND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    kind: TargetKind
    value: str
    reason: str
    def __init__(self, kind: _Optional[_Union[TargetKind, str]] = ..., value: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class FailureCount(_message.Message):
    __slots__ = ("reason", "count")
    REASON_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    reason: str
    count: int
    def __init__(self, reason: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class DeliverySummary(_message.Message):
    __slots__ = ("targeted", "queued", "delivered", "failed", "failures", "pruned", "superseded", "expired", "unresolved", "complete", "downgraded")
    TARGETED_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    PRUNED_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    EXPIRED_FIELD_NUMBER: _ClassVar[int]
    UNRESOLVED_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    DOWNGRADED_FIELD_NUMBER: _ClassVar[int]
    targeted: int
    queued: int
    delivered: int
    failed: int
    failures: _containers.RepeatedCompositeFieldContainer[FailureCount]
    pruned: int
    superseded: int
    expired: int
    unresolved: _containers.RepeatedCompositeFieldContainer[UnresolvedTarget]
    complete: bool
    downgraded: int
    def __init__(self, targeted: _Optional[int] = ..., queued: _Optional[int] = ..., delivered: _Optional[int] = ..., failed: _Optional[int] = ..., failures: _Optional[_Iterable[_Union[FailureCount, _Mapping]]] = ..., pruned: _Optional[int] = ..., superseded: _Optional[int] = ..., expired: _Optional[int] = ..., unresolved: _Optional[_Iterable[_Union[UnresolvedTarget, _Mapping]]] = ..., complete: bool = ..., downgraded: _Optional[int] = ...) -> None: ...

class StartActivityReply(_message.Message):
    __slots__ = ("activity_id", "timestamp", "summary", "replayed", "state")
    ACTIVITY_ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    activity_id: str
    timestamp: int
    summary: DeliverySummary
    replayed: bool
    state: ActivityState
    def __init__(self, activity_id: _Optional[str] = ..., timestamp: _Optional[int] = ..., summary: _Optional[_Union[DeliverySummary, _Mapping]] = ..., replayed: bool = ..., state: _Optional[_Union[ActivityState, str]] = ...) -> None: ...

class UpdateActivityReply(_message.Message):
    __slots__ = ("timestamp", "summary", "replayed", "state")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    summary: DeliverySummary
    replayed: bool
    state: ActivityState
    def __init__(self, timestamp: _Optional[int] = ..., summary: _Optional[_Union[DeliverySummary, _Mapping]] = ..., replayed: bool = ..., state: _Optional[_Union[ActivityState, str]] = ...) -> None: ...

class EndActivityReply(_message.Message):
    __slots__ = ("timestamp", "summary", "replayed", "state")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    summary: DeliverySummary
    replayed: bool
    state: ActivityState
    def __init__(self, timestamp: _Optional[int] = ..., summary: _Optional[_Union[DeliverySummary, _Mapping]] = ..., replayed: bool = ..., state: _Optional[_Union[ActivityState, str]] = ...) -> None: ...

class PingRequest(_message.Message):
    __slots__ = ("payload",)
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    def __init__(self, payload: _Optional[bytes] = ...) -> None: ...

class PingReply(_message.Message):
    __slots__ = ("payload", "server_time_ms", "server_version")
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    SERVER_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    server_time_ms: int
    server_version: str
    def __init__(self, payload: _Optional[bytes] = ..., server_time_ms: _Optional[int] = ..., server_version: _Optional[str] = ...) -> None: ...

class ErrorDetails(_message.Message):
    __slots__ = ("field_violations", "retry_after_ms", "reason")
    FIELD_VIOLATIONS_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    field_violations: _containers.RepeatedCompositeFieldContainer[FieldViolation]
    retry_after_ms: int
    reason: str
    def __init__(self, field_violations: _Optional[_Iterable[_Union[FieldViolation, _Mapping]]] = ..., retry_after_ms: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class FieldViolation(_message.Message):
    __slots__ = ("field", "description")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    field: str
    description: str
    def __init__(self, field: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class Channel(_message.Message):
    __slots__ = ("app_id", "channel_id", "environment", "storage_policy", "created_at")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    STORAGE_POLICY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    channel_id: str
    environment: Environment
    storage_policy: ChannelStoragePolicy
    created_at: int
    def __init__(self, app_id: _Optional[str] = ..., channel_id: _Optional[str] = ..., environment: _Optional[_Union[Environment, str]] = ..., storage_policy: _Optional[_Union[ChannelStoragePolicy, str]] = ..., created_at: _Optional[int] = ...) -> None: ...

class CreateChannelRequest(_message.Message):
    __slots__ = ("app_id", "environment", "storage_policy")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    STORAGE_POLICY_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    environment: Environment
    storage_policy: ChannelStoragePolicy
    def __init__(self, app_id: _Optional[str] = ..., environment: _Optional[_Union[Environment, str]] = ..., storage_policy: _Optional[_Union[ChannelStoragePolicy, str]] = ...) -> None: ...

class CreateChannelReply(_message.Message):
    __slots__ = ("channel",)
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    channel: Channel
    def __init__(self, channel: _Optional[_Union[Channel, _Mapping]] = ...) -> None: ...

class ListChannelsRequest(_message.Message):
    __slots__ = ("app_id", "environment", "page_size", "page_token")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    environment: Environment
    page_size: int
    page_token: str
    def __init__(self, app_id: _Optional[str] = ..., environment: _Optional[_Union[Environment, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListChannelsReply(_message.Message):
    __slots__ = ("channels", "next_page_token")
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    channels: _containers.RepeatedCompositeFieldContainer[Channel]
    next_page_token: str
    def __init__(self, channels: _Optional[_Iterable[_Union[Channel, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteChannelRequest(_message.Message):
    __slots__ = ("app_id", "channel_id")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    channel_id: str
    def __init__(self, app_id: _Optional[str] = ..., channel_id: _Optional[str] = ...) -> None: ...

class DeleteChannelReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Event(_message.Message):
    __slots__ = ("cursor", "kind", "time_ms", "activity_id", "call_timestamp", "idempotency_key", "account", "token", "token_kind", "reason", "invalid_since_ms", "activity_state", "channel_id")
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOKEN_KIND_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    INVALID_SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_STATE_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    cursor: int
    kind: EventKind
    time_ms: int
    activity_id: str
    call_timestamp: int
    idempotency_key: str
    account: DeliverySummary
    token: str
    token_kind: TokenKind
    reason: str
    invalid_since_ms: int
    activity_state: ActivityState
    channel_id: str
    def __init__(self, cursor: _Optional[int] = ..., kind: _Optional[_Union[EventKind, str]] = ..., time_ms: _Optional[int] = ..., activity_id: _Optional[str] = ..., call_timestamp: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., account: _Optional[_Union[DeliverySummary, _Mapping]] = ..., token: _Optional[str] = ..., token_kind: _Optional[_Union[TokenKind, str]] = ..., reason: _Optional[str] = ..., invalid_since_ms: _Optional[int] = ..., activity_state: _Optional[_Union[ActivityState, str]] = ..., channel_id: _Optional[str] = ...) -> None: ...

class ListEventsRequest(_message.Message):
    __slots__ = ("app_id", "after_cursor", "max_events", "wait_ms")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_CURSOR_FIELD_NUMBER: _ClassVar[int]
    MAX_EVENTS_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    after_cursor: int
    max_events: int
    wait_ms: int
    def __init__(self, app_id: _Optional[str] = ..., after_cursor: _Optional[int] = ..., max_events: _Optional[int] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class ListEventsReply(_message.Message):
    __slots__ = ("events", "next_cursor", "more")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    next_cursor: int
    more: bool
    def __init__(self, events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., next_cursor: _Optional[int] = ..., more: bool = ...) -> None: ...
