from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Quotas(_message.Message):
    __slots__ = ("calls_per_second", "burst", "pushes_per_hour", "max_tokens", "max_live_activities", "priority_budget_per_hour")
    CALLS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    PUSHES_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_LIVE_ACTIVITIES_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_BUDGET_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    calls_per_second: float
    burst: int
    pushes_per_hour: int
    max_tokens: int
    max_live_activities: int
    priority_budget_per_hour: int
    def __init__(self, calls_per_second: _Optional[float] = ..., burst: _Optional[int] = ..., pushes_per_hour: _Optional[int] = ..., max_tokens: _Optional[int] = ..., max_live_activities: _Optional[int] = ..., priority_budget_per_hour: _Optional[int] = ...) -> None: ...

class APNsCredentialsInfo(_message.Message):
    __slots__ = ("team_id", "key_id", "endpoint", "key_source", "public_key_sha256", "updated_at_ms")
    TEAM_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    KEY_SOURCE_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_SHA256_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    team_id: str
    key_id: str
    endpoint: str
    key_source: str
    public_key_sha256: str
    updated_at_ms: int
    def __init__(self, team_id: _Optional[str] = ..., key_id: _Optional[str] = ..., endpoint: _Optional[str] = ..., key_source: _Optional[str] = ..., public_key_sha256: _Optional[str] = ..., updated_at_ms: _Optional[int] = ...) -> None: ...

class App(_message.Message):
    __slots__ = ("app_id", "bundle_id", "enabled", "queue_capacity", "weight", "max_push_lifetime_s", "quotas", "credentials", "created_at_ms", "updated_at_ms", "owner")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_ID_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    QUEUE_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    MAX_PUSH_LIFETIME_S_FIELD_NUMBER: _ClassVar[int]
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    bundle_id: str
    enabled: bool
    queue_capacity: int
    weight: int
    max_push_lifetime_s: int
    quotas: Quotas
    credentials: APNsCredentialsInfo
    created_at_ms: int
    updated_at_ms: int
    owner: str
    def __init__(self, app_id: _Optional[str] = ..., bundle_id: _Optional[str] = ..., enabled: bool = ..., queue_capacity: _Optional[int] = ..., weight: _Optional[int] = ..., max_push_lifetime_s: _Optional[int] = ..., quotas: _Optional[_Union[Quotas, _Mapping]] = ..., credentials: _Optional[_Union[APNsCredentialsInfo, _Mapping]] = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ..., owner: _Optional[str] = ...) -> None: ...

class CreateAppRequest(_message.Message):
    __slots__ = ("app_id", "bundle_id", "queue_capacity", "weight", "max_push_lifetime_s", "quotas")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    MAX_PUSH_LIFETIME_S_FIELD_NUMBER: _ClassVar[int]
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    bundle_id: str
    queue_capacity: int
    weight: int
    max_push_lifetime_s: int
    quotas: Quotas
    def __init__(self, app_id: _Optional[str] = ..., bundle_id: _Optional[str] = ..., queue_capacity: _Optional[int] = ..., weight: _Optional[int] = ..., max_push_lifetime_s: _Optional[int] = ..., quotas: _Optional[_Union[Quotas, _Mapping]] = ...) -> None: ...

class UpdateAppRequest(_message.Message):
    __slots__ = ("app_id", "bundle_id", "queue_capacity", "weight", "max_push_lifetime_s", "quotas", "enabled")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    BUNDLE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    MAX_PUSH_LIFETIME_S_FIELD_NUMBER: _ClassVar[int]
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    bundle_id: str
    queue_capacity: int
    weight: int
    max_push_lifetime_s: int
    quotas: Quotas
    enabled: bool
    def __init__(self, app_id: _Optional[str] = ..., bundle_id: _Optional[str] = ..., queue_capacity: _Optional[int] = ..., weight: _Optional[int] = ..., max_push_lifetime_s: _Optional[int] = ..., quotas: _Optional[_Union[Quotas, _Mapping]] = ..., enabled: bool = ...) -> None: ...

class GetAppRequest(_message.Message):
    __slots__ = ("app_id",)
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    def __init__(self, app_id: _Optional[str] = ...) -> None: ...

class DisableAppRequest(_message.Message):
    __slots__ = ("app_id",)
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    def __init__(self, app_id: _Optional[str] = ...) -> None: ...

class AppReply(_message.Message):
    __slots__ = ("app",)
    APP_FIELD_NUMBER: _ClassVar[int]
    app: App
    def __init__(self, app: _Optional[_Union[App, _Mapping]] = ...) -> None: ...

class ListAppsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "include_disabled")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_DISABLED_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    include_disabled: bool
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., include_disabled: bool = ...) -> None: ...

class ListAppsReply(_message.Message):
    __slots__ = ("apps", "next_page_token")
    APPS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    apps: _containers.RepeatedCompositeFieldContainer[App]
    next_page_token: str
    def __init__(self, apps: _Optional[_Iterable[_Union[App, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PutAPNsCredentialsRequest(_message.Message):
    __slots__ = ("app_id", "team_id", "key_id", "private_key_pem", "private_key_file", "private_key_env", "endpoint", "trust_certificate_pem")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    TEAM_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    PRIVATE_KEY_PEM_FIELD_NUMBER: _ClassVar[int]
    PRIVATE_KEY_FILE_FIELD_NUMBER: _ClassVar[int]
    PRIVATE_KEY_ENV_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    TRUST_CERTIFICATE_PEM_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    team_id: str
    key_id: str
    private_key_pem: bytes
    private_key_file: str
    private_key_env: str
    endpoint: str
    trust_certificate_pem: bytes
    def __init__(self, app_id: _Optional[str] = ..., team_id: _Optional[str] = ..., key_id: _Optional[str] = ..., private_key_pem: _Optional[bytes] = ..., private_key_file: _Optional[str] = ..., private_key_env: _Optional[str] = ..., endpoint: _Optional[str] = ..., trust_certificate_pem: _Optional[bytes] = ...) -> None: ...

class APIKey(_message.Message):
    __slots__ = ("key_id", "app_ids", "all_apps", "allowed_methods", "admin", "label", "created_at_ms", "last_used_at_ms", "revoked_at_ms", "owner")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    APP_IDS_FIELD_NUMBER: _ClassVar[int]
    ALL_APPS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_METHODS_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    app_ids: _containers.RepeatedScalarFieldContainer[str]
    all_apps: bool
    allowed_methods: _containers.RepeatedScalarFieldContainer[str]
    admin: bool
    label: str
    created_at_ms: int
    last_used_at_ms: int
    revoked_at_ms: int
    owner: str
    def __init__(self, key_id: _Optional[str] = ..., app_ids: _Optional[_Iterable[str]] = ..., all_apps: bool = ..., allowed_methods: _Optional[_Iterable[str]] = ..., admin: bool = ..., label: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., last_used_at_ms: _Optional[int] = ..., revoked_at_ms: _Optional[int] = ..., owner: _Optional[str] = ...) -> None: ...

class CreateAPIKeyRequest(_message.Message):
    __slots__ = ("app_ids", "all_apps", "allowed_methods", "admin", "label")
    APP_IDS_FIELD_NUMBER: _ClassVar[int]
    ALL_APPS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_METHODS_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    app_ids: _containers.RepeatedScalarFieldContainer[str]
    all_apps: bool
    allowed_methods: _containers.RepeatedScalarFieldContainer[str]
    admin: bool
    label: str
    def __init__(self, app_ids: _Optional[_Iterable[str]] = ..., all_apps: bool = ..., allowed_methods: _Optional[_Iterable[str]] = ..., admin: bool = ..., label: _Optional[str] = ...) -> None: ...

class CreateAPIKeyReply(_message.Message):
    __slots__ = ("key", "secret")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    key: APIKey
    secret: str
    def __init__(self, key: _Optional[_Union[APIKey, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class ListAPIKeysRequest(_message.Message):
    __slots__ = ("app_id", "include_revoked", "page_size", "page_token")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_REVOKED_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    include_revoked: bool
    page_size: int
    page_token: str
    def __init__(self, app_id: _Optional[str] = ..., include_revoked: bool = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAPIKeysReply(_message.Message):
    __slots__ = ("keys", "next_page_token")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[APIKey]
    next_page_token: str
    def __init__(self, keys: _Optional[_Iterable[_Union[APIKey, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RevokeAPIKeyRequest(_message.Message):
    __slots__ = ("key_id",)
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    def __init__(self, key_id: _Optional[str] = ...) -> None: ...

class APIKeyReply(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: APIKey
    def __init__(self, key: _Optional[_Union[APIKey, _Mapping]] = ...) -> None: ...

class GetAppStatsRequest(_message.Message):
    __slots__ = ("app_id",)
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    def __init__(self, app_id: _Optional[str] = ...) -> None: ...

class OutcomeCount(_message.Message):
    __slots__ = ("outcome", "reason", "count")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    outcome: str
    reason: str
    count: int
    def __init__(self, outcome: _Optional[str] = ..., reason: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class AppStats(_message.Message):
    __slots__ = ("app_id", "queue_depth", "queue_capacity", "pushes", "pushes_last_hour", "tokens", "live_activities", "quotas", "nodes", "held_reason", "held_for_ms", "webhook_state", "webhook_backlog")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    QUEUE_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    PUSHES_FIELD_NUMBER: _ClassVar[int]
    PUSHES_LAST_HOUR_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    LIVE_ACTIVITIES_FIELD_NUMBER: _ClassVar[int]
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    HELD_REASON_FIELD_NUMBER: _ClassVar[int]
    HELD_FOR_MS_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_STATE_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_BACKLOG_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    queue_depth: int
    queue_capacity: int
    pushes: _containers.RepeatedCompositeFieldContainer[OutcomeCount]
    pushes_last_hour: int
    tokens: int
    live_activities: int
    quotas: Quotas
    nodes: int
    held_reason: str
    held_for_ms: int
    webhook_state: str
    webhook_backlog: int
    def __init__(self, app_id: _Optional[str] = ..., queue_depth: _Optional[int] = ..., queue_capacity: _Optional[int] = ..., pushes: _Optional[_Iterable[_Union[OutcomeCount, _Mapping]]] = ..., pushes_last_hour: _Optional[int] = ..., tokens: _Optional[int] = ..., live_activities: _Optional[int] = ..., quotas: _Optional[_Union[Quotas, _Mapping]] = ..., nodes: _Optional[int] = ..., held_reason: _Optional[str] = ..., held_for_ms: _Optional[int] = ..., webhook_state: _Optional[str] = ..., webhook_backlog: _Optional[int] = ...) -> None: ...

class Webhook(_message.Message):
    __slots__ = ("app_id", "url", "event_kinds", "created_at_ms", "updated_at_ms", "state", "delivered_cursor", "last_success_at_ms", "last_error", "failing_since_ms", "attempts")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    EVENT_KINDS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_CURSOR_FIELD_NUMBER: _ClassVar[int]
    LAST_SUCCESS_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    FAILING_SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    url: str
    event_kinds: _containers.RepeatedScalarFieldContainer[str]
    created_at_ms: int
    updated_at_ms: int
    state: str
    delivered_cursor: int
    last_success_at_ms: int
    last_error: str
    failing_since_ms: int
    attempts: int
    def __init__(self, app_id: _Optional[str] = ..., url: _Optional[str] = ..., event_kinds: _Optional[_Iterable[str]] = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ..., state: _Optional[str] = ..., delivered_cursor: _Optional[int] = ..., last_success_at_ms: _Optional[int] = ..., last_error: _Optional[str] = ..., failing_since_ms: _Optional[int] = ..., attempts: _Optional[int] = ...) -> None: ...

class PutWebhookRequest(_message.Message):
    __slots__ = ("app_id", "url", "event_kinds", "rotate_secret")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    EVENT_KINDS_FIELD_NUMBER: _ClassVar[int]
    ROTATE_SECRET_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    url: str
    event_kinds: _containers.RepeatedScalarFieldContainer[str]
    rotate_secret: bool
    def __init__(self, app_id: _Optional[str] = ..., url: _Optional[str] = ..., event_kinds: _Optional[_Iterable[str]] = ..., rotate_secret: bool = ...) -> None: ...

class PutWebhookReply(_message.Message):
    __slots__ = ("webhook", "signing_secret")
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    SIGNING_SECRET_FIELD_NUMBER: _ClassVar[int]
    webhook: Webhook
    signing_secret: str
    def __init__(self, webhook: _Optional[_Union[Webhook, _Mapping]] = ..., signing_secret: _Optional[str] = ...) -> None: ...

class GetWebhookRequest(_message.Message):
    __slots__ = ("app_id",)
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    def __init__(self, app_id: _Optional[str] = ...) -> None: ...

class DeleteWebhookRequest(_message.Message):
    __slots__ = ("app_id",)
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    def __init__(self, app_id: _Optional[str] = ...) -> None: ...

class ResetWebhookRequest(_message.Message):
    __slots__ = ("app_id",)
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    def __init__(self, app_id: _Optional[str] = ...) -> None: ...

class WebhookReply(_message.Message):
    __slots__ = ("webhook",)
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    webhook: Webhook
    def __init__(self, webhook: _Optional[_Union[Webhook, _Mapping]] = ...) -> None: ...
