from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Priority(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRIORITY_UNSPECIFIED: _ClassVar[Priority]
    PRIORITY_LOW: _ClassVar[Priority]
    PRIORITY_HIGH: _ClassVar[Priority]
PRIORITY_UNSPECIFIED: Priority
PRIORITY_LOW: Priority
PRIORITY_HIGH: Priority

class Alert(_message.Message):
    __slots__ = ("title", "body", "sound")
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    SOUND_FIELD_NUMBER: _ClassVar[int]
    title: str
    body: str
    sound: str
    def __init__(self, title: _Optional[str] = ..., body: _Optional[str] = ..., sound: _Optional[str] = ...) -> None: ...

class Targets(_message.Message):
    __slots__ = ("push_to_start_tokens", "external_user_ids", "all_devices")
    PUSH_TO_START_TOKENS_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_USER_IDS_FIELD_NUMBER: _ClassVar[int]
    ALL_DEVICES_FIELD_NUMBER: _ClassVar[int]
    push_to_start_tokens: _containers.RepeatedScalarFieldContainer[str]
    external_user_ids: _containers.RepeatedScalarFieldContainer[str]
    all_devices: bool
    def __init__(self, push_to_start_tokens: _Optional[_Iterable[str]] = ..., external_user_ids: _Optional[_Iterable[str]] = ..., all_devices: bool = ...) -> None: ...

class StartActivityRequest(_message.Message):
    __slots__ = ("app_id", "activity_id", "attributes_type", "attributes_json", "content_state_json", "alert", "stale_date", "dismissal_date", "relevance_score", "priority", "targets", "idempotency_key", "wait_for_delivery", "channel_id", "input_push_token", "strict_priority_budget")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_ID_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_TYPE_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_JSON_FIELD_NUMBER: _ClassVar[int]
    CONTENT_STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    ALERT_FIELD_NUMBER: _ClassVar[int]
    STALE_DATE_FIELD_NUMBER: _ClassVar[int]
    DISMISSAL_DATE_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_SCORE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    WAIT_FOR_DELIVERY_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_PUSH_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STRICT_PRIORITY_BUDGET_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    activity_id: str
    attributes_type: str
    attributes_json: str
    content_state_json: str
    alert: Alert
    stale_date: int
    dismissal_date: int
    relevance_score: float
    priority: Priority
    targets: Targets
    idempotency_key: str
    wait_for_delivery: bool
    channel_id: str
    input_push_token: bool
    strict_priority_budget: bool
    def __init__(self, app_id: _Optional[str] = ..., activity_id: _Optional[str] = ..., attributes_type: _Optional[str] = ..., attributes_json: _Optional[str] = ..., content_state_json: _Optional[str] = ..., alert: _Optional[_Union[Alert, _Mapping]] = ..., stale_date: _Optional[int] = ..., dismissal_date: _Optional[int] = ..., relevance_score: _Optional[float] = ..., priority: _Optional[_Union[Priority, str]] = ..., targets: _Optional[_Union[Targets, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., wait_for_delivery: bool = ..., channel_id: _Optional[str] = ..., input_push_token: bool = ..., strict_priority_budget: bool = ...) -> None: ...

class UpdateActivityRequest(_message.Message):
    __slots__ = ("app_id", "activity_id", "content_state_json", "alert", "stale_date", "dismissal_date", "relevance_score", "priority", "end_activity", "idempotency_key", "wait_for_delivery", "channel_id", "channel_only", "strict_priority_budget")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    ALERT_FIELD_NUMBER: _ClassVar[int]
    STALE_DATE_FIELD_NUMBER: _ClassVar[int]
    DISMISSAL_DATE_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_SCORE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    END_ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    WAIT_FOR_DELIVERY_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ONLY_FIELD_NUMBER: _ClassVar[int]
    STRICT_PRIORITY_BUDGET_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    activity_id: str
    content_state_json: str
    alert: Alert
    stale_date: int
    dismissal_date: int
    relevance_score: float
    priority: Priority
    end_activity: bool
    idempotency_key: str
    wait_for_delivery: bool
    channel_id: str
    channel_only: bool
    strict_priority_budget: bool
    def __init__(self, app_id: _Optional[str] = ..., activity_id: _Optional[str] = ..., content_state_json: _Optional[str] = ..., alert: _Optional[_Union[Alert, _Mapping]] = ..., stale_date: _Optional[int] = ..., dismissal_date: _Optional[int] = ..., relevance_score: _Optional[float] = ..., priority: _Optional[_Union[Priority, str]] = ..., end_activity: bool = ..., idempotency_key: _Optional[str] = ..., wait_for_delivery: bool = ..., channel_id: _Optional[str] = ..., channel_only: bool = ..., strict_priority_budget: bool = ...) -> None: ...

class EndActivityRequest(_message.Message):
    __slots__ = ("app_id", "activity_id", "content_state_json", "dismissal_date", "idempotency_key", "wait_for_delivery", "alert", "priority", "stale_date", "relevance_score", "channel_id", "channel_only", "strict_priority_budget")
    APP_ID_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_STATE_JSON_FIELD_NUMBER: _ClassVar[int]
    DISMISSAL_DATE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    WAIT_FOR_DELIVERY_FIELD_NUMBER: _ClassVar[int]
    ALERT_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    STALE_DATE_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_SCORE_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ONLY_FIELD_NUMBER: _ClassVar[int]
    STRICT_PRIORITY_BUDGET_FIELD_NUMBER: _ClassVar[int]
    app_id: str
    activity_id: str
    content_state_json: str
    dismissal_date: int
    idempotency_key: str
    wait_for_delivery: bool
    alert: Alert
    priority: Priority
    stale_date: int
    relevance_score: float
    channel_id: str
    channel_only: bool
    strict_priority_budget: bool
    def __init__(self, app_id: _Optional[str] = ..., activity_id: _Optional[str] = ..., content_state_json: _Optional[str] = ..., dismissal_date: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., wait_for_delivery: bool = ..., alert: _Optional[_Union[Alert, _Mapping]] = ..., priority: _Optional[_Union[Priority, str]] = ..., stale_date: _Optional[int] = ..., relevance_score: _Optional[float] = ..., channel_id: _Optional[str] = ..., channel_only: bool = ..., strict_priority_budget: bool = ...) -> None: ...
