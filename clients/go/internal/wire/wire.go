// Package wire is the frame codec of the LiveRelay protocol, version 1
// (docs/PROTOCOL.md, sections 2 to 4): the connection preface, the 10-byte
// frame header and the layout of every frame type's payload.
//
// It does no I/O beyond reading whole frames from a buffered reader and keeps
// no connection state, so every byte rule can be tested without a socket.
// Encoders append to a caller's buffer; decoders check every layout rule and
// return a *Violation naming the frame and the field, which a client turns
// into a GOAWAY with the violation's code.
package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Magic is the 8-byte connection preface, "LRPC" CR LF ^Z LF (section 2).
var Magic = [8]byte{0x4C, 0x52, 0x50, 0x43, 0x0D, 0x0A, 0x1A, 0x0A}

const (
	// HeaderSize is the fixed frame header: length u32, type u8, flags u8, request id u32.
	HeaderSize = 10
	// Version is the only protocol version.
	Version = 1
	// MaxHelloPayload bounds HELLO whatever MAX_FRAME_SIZE says.
	MaxHelloPayload = 4096
	// DefaultMaxFrameSize is MAX_FRAME_SIZE until a peer says otherwise.
	DefaultMaxFrameSize = 1_048_576
	// MinMaxFrameSize and MaxMaxFrameSize bound a valid MAX_FRAME_SIZE.
	MinMaxFrameSize = 16_384
	MaxMaxFrameSize = 16_777_215
	// DefaultMaxRequestsInFlight is MAX_REQUESTS_IN_FLIGHT until WELCOME.
	DefaultMaxRequestsInFlight = 100
	// SafeBeforeWelcome is the largest REQUEST payload every server accepts
	// before its WELCOME has told its MAX_FRAME_SIZE (section 4).
	SafeBeforeWelcome = MinMaxFrameSize
	// MaxRequestID is the last id a connection may use (section 5).
	MaxRequestID = 0xFFFF_FFFF
	// PingSize is the exact payload of PING and PONG.
	PingSize = 8
)

// FrameType is the header's type byte (section 3.2).
type FrameType uint8

// The frame types of version 1.
const (
	Hello    FrameType = 0x01
	Welcome  FrameType = 0x02
	Request  FrameType = 0x03
	Response FrameType = 0x04
	Error    FrameType = 0x05
	Cancel   FrameType = 0x06
	Ping     FrameType = 0x07
	Pong     FrameType = 0x08
	GoAway   FrameType = 0x09
)

var frameTypeNames = [...]string{"", "HELLO", "WELCOME", "REQUEST", "RESPONSE", "ERROR", "CANCEL", "PING", "PONG", "GOAWAY"}

func (t FrameType) String() string {
	if t.Known() {
		return frameTypeNames[t]
	}
	return fmt.Sprintf("0x%02X", uint8(t))
}

// Known reports whether version 1 defines the type: an unknown one is a
// connection error, never a frame to skip.
func (t FrameType) Known() bool { return t >= Hello && t <= GoAway }

// RequestLevel reports whether frames of the type carry a request id (≥ 1);
// the others carry 0.
func (t FrameType) RequestLevel() bool {
	return t == Request || t == Response || t == Error || t == Cancel
}

// GoAwayCode is GOAWAY's code (section 3.10).
type GoAwayCode uint32

// The GOAWAY codes of version 1. A receiver treats any other like InternalError.
const (
	NoError            GoAwayCode = 0
	ProtocolError      GoAwayCode = 1
	InternalError      GoAwayCode = 2
	FrameSizeError     GoAwayCode = 3
	UnsupportedVersion GoAwayCode = 4
	Unauthenticated    GoAwayCode = 5
	IdleTimeout        GoAwayCode = 6
	HelloTimeout       GoAwayCode = 7
	EnhanceYourCalm    GoAwayCode = 8
	TooManyConnections GoAwayCode = 9
)

var goAwayNames = [...]string{
	"NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FRAME_SIZE_ERROR", "UNSUPPORTED_VERSION",
	"UNAUTHENTICATED", "IDLE_TIMEOUT", "HELLO_TIMEOUT", "ENHANCE_YOUR_CALM", "TOO_MANY_CONNECTIONS",
}

func (c GoAwayCode) String() string {
	if int(c) < len(goAwayNames) {
		return goAwayNames[c]
	}
	return fmt.Sprintf("UNKNOWN_%d", uint32(c))
}

// Setting ids (section 4).
const (
	SettingMaxFrameSize        uint16 = 0x0001
	SettingMaxRequestsInFlight uint16 = 0x0002
	SettingIdleTimeoutMS       uint16 = 0x0003
	settingSize                       = 6
	goAwayFixedSize                   = 10
	errorFixedSize                    = 3
	requestFixedSize                  = 5
	helloFixedSize                    = 7
	maxAPIKeySize                     = 512
	maxClientNameSize                 = 255
	maxMethodSize                     = 255
	maxTextSize                       = 0xFFFF
	firstStatusInErrorFrame           = 1
	lastStatusInErrorFrame            = 16
	welcomeVersionSize                = 2
)

// Violation is a broken rule of the protocol, found in what the peer sent:
// the connection ends with GOAWAY Code, and Reason says what was wrong.
type Violation struct {
	Code   GoAwayCode
	Reason string
}

func (v *Violation) Error() string { return v.Code.String() + ": " + v.Reason }

func violation(format string, args ...any) *Violation {
	return &Violation{Code: ProtocolError, Reason: fmt.Sprintf(format, args...)}
}

// Header is a frame header.
type Header struct {
	Length    uint32
	Type      FrameType
	Flags     uint8
	RequestID uint32
}

// AppendHeader appends the 10 header bytes.
func AppendHeader(b []byte, h Header) []byte {
	b = binary.BigEndian.AppendUint32(b, h.Length)
	b = append(b, byte(h.Type), h.Flags)
	return binary.BigEndian.AppendUint32(b, h.RequestID)
}

// ParseHeader reads a header from the first 10 bytes of b.
func ParseHeader(b []byte) Header {
	_ = b[HeaderSize-1]
	return Header{
		Length:    binary.BigEndian.Uint32(b[0:4]),
		Type:      FrameType(b[4]),
		Flags:     b[5],
		RequestID: binary.BigEndian.Uint32(b[6:10]),
	}
}

// CheckFromServer makes the checks a client makes from a header alone,
// before it reads (or buffers) the payload (section 3.1): a known type, a
// length within the client's MAX_FRAME_SIZE, an id of the type's kind, and a
// type the server may send.
func (h Header) CheckFromServer(maxFrameSize uint32) error {
	if !h.Type.Known() {
		return violation("unknown frame type %s", h.Type)
	}
	if h.Length > maxFrameSize {
		return &Violation{Code: FrameSizeError, Reason: fmt.Sprintf("%s frame of %d bytes is above MAX_FRAME_SIZE %d", h.Type, h.Length, maxFrameSize)}
	}
	if h.Type.RequestLevel() && h.RequestID == 0 {
		return violation("%s frame with request id 0", h.Type)
	}
	if !h.Type.RequestLevel() && h.RequestID != 0 {
		return violation("%s frame with request id %d", h.Type, h.RequestID)
	}
	switch h.Type {
	case Hello, Request, Cancel:
		return violation("%s frame from the server", h.Type)
	}
	return nil
}

// Frame is a whole frame as read.
type Frame struct {
	Header
	Payload []byte
}

// BeginFrame appends a header whose length EndFrame fills in once the
// payload has been appended; it returns the header's offset.
func BeginFrame(b []byte, t FrameType, requestID uint32) ([]byte, int) {
	start := len(b)
	return AppendHeader(b, Header{Type: t, RequestID: requestID}), start
}

// EndFrame writes the length of the payload that follows the header at start.
func EndFrame(b []byte, start int) {
	binary.BigEndian.PutUint32(b[start:start+4], uint32(len(b)-start-HeaderSize))
}

// SettingPair is one (id, value) of HELLO's or WELCOME's settings.
type SettingPair struct {
	ID    uint16
	Value uint32
}

// HelloFields are HELLO's payload fields (section 3.3).
type HelloFields struct {
	MinVersion, MaxVersion uint16
	APIKey                 []byte
	ClientName             string
	Settings               []SettingPair
}

// AppendHello appends a whole HELLO frame, or fails (without appending)
// when a field is out of its bounds. The error never contains the key.
func AppendHello(b []byte, h HelloFields) ([]byte, error) {
	if len(h.APIKey) < 1 || len(h.APIKey) > maxAPIKeySize {
		return b, fmt.Errorf("the API key must be 1 to %d bytes, it is %d", maxAPIKeySize, len(h.APIKey))
	}
	if len(h.ClientName) > maxClientNameSize || !utf8.ValidString(h.ClientName) {
		return b, fmt.Errorf("the client name must be 0 to %d bytes of UTF-8", maxClientNameSize)
	}
	if h.MinVersion > h.MaxVersion {
		return b, fmt.Errorf("min version %d is above max version %d", h.MinVersion, h.MaxVersion)
	}
	if size := helloFixedSize + len(h.APIKey) + len(h.ClientName) + settingSize*len(h.Settings); size > MaxHelloPayload {
		return b, fmt.Errorf("HELLO payload of %d bytes is above %d", size, MaxHelloPayload)
	}
	out, start := BeginFrame(b, Hello, 0)
	out = binary.BigEndian.AppendUint16(out, h.MinVersion)
	out = binary.BigEndian.AppendUint16(out, h.MaxVersion)
	out = binary.BigEndian.AppendUint16(out, uint16(len(h.APIKey)))
	out = append(out, h.APIKey...)
	out = append(out, byte(len(h.ClientName)))
	out = append(out, h.ClientName...)
	out = AppendSettings(out, h.Settings)
	EndFrame(out, start)
	return out, nil
}

// AppendSettings appends (u16 id, u32 value) pairs in the given order.
func AppendSettings(b []byte, settings []SettingPair) []byte {
	for _, s := range settings {
		b = binary.BigEndian.AppendUint16(b, s.ID)
		b = binary.BigEndian.AppendUint32(b, s.Value)
	}
	return b
}

func parseSettings(p []byte, frame string) ([]SettingPair, error) {
	if len(p)%settingSize != 0 {
		return nil, violation("malformed %s frame: settings are %d bytes, not a multiple of 6", frame, len(p))
	}
	out := make([]SettingPair, 0, len(p)/settingSize)
	for i := 0; i < len(p); i += settingSize {
		out = append(out, SettingPair{ID: binary.BigEndian.Uint16(p[i:]), Value: binary.BigEndian.Uint32(p[i+2:])})
	}
	return out, nil
}

// ServerSettings are the settings a client reads from WELCOME, each at its
// default when absent.
type ServerSettings struct {
	MaxFrameSize        uint32
	MaxRequestsInFlight uint32
	IdleTimeoutMS       uint32
}

// DefaultServerSettings are what a client assumes until WELCOME.
func DefaultServerSettings() ServerSettings {
	return ServerSettings{MaxFrameSize: DefaultMaxFrameSize, MaxRequestsInFlight: DefaultMaxRequestsInFlight}
}

// WelcomeFields are WELCOME's payload (section 3.4).
type WelcomeFields struct {
	Version  uint16
	Settings []SettingPair
}

// AppendWelcome appends a whole WELCOME frame (tests play the server with it).
func AppendWelcome(b []byte, w WelcomeFields) []byte {
	out, start := BeginFrame(b, Welcome, 0)
	out = binary.BigEndian.AppendUint16(out, w.Version)
	out = AppendSettings(out, w.Settings)
	EndFrame(out, start)
	return out
}

// ParseWelcome decodes WELCOME's payload and the settings a client reads,
// refusing invalid values of those (unknown ids are ignored, section 4).
func ParseWelcome(p []byte) (WelcomeFields, ServerSettings, error) {
	settings := DefaultServerSettings()
	if len(p) < welcomeVersionSize {
		return WelcomeFields{}, settings, violation("malformed WELCOME frame: version missing")
	}
	pairs, err := parseSettings(p[welcomeVersionSize:], "WELCOME")
	if err != nil {
		return WelcomeFields{}, settings, err
	}
	for _, s := range pairs {
		switch s.ID {
		case SettingMaxFrameSize:
			if s.Value < MinMaxFrameSize || s.Value > MaxMaxFrameSize {
				return WelcomeFields{}, settings, violation("malformed WELCOME frame: MAX_FRAME_SIZE %d is not in %d...%d", s.Value, MinMaxFrameSize, MaxMaxFrameSize)
			}
			settings.MaxFrameSize = s.Value
		case SettingMaxRequestsInFlight:
			if s.Value < 1 {
				return WelcomeFields{}, settings, violation("malformed WELCOME frame: MAX_REQUESTS_IN_FLIGHT is 0")
			}
			settings.MaxRequestsInFlight = s.Value
		case SettingIdleTimeoutMS:
			settings.IdleTimeoutMS = s.Value
		}
	}
	return WelcomeFields{Version: binary.BigEndian.Uint16(p), Settings: pairs}, settings, nil
}

// ValidMethod reports whether m can be a REQUEST's method: 1 to 255 bytes of
// printable ASCII (0x21 to 0x7E).
func ValidMethod(m string) bool {
	if len(m) < 1 || len(m) > maxMethodSize {
		return false
	}
	for i := 0; i < len(m); i++ {
		if m[i] < 0x21 || m[i] > 0x7E {
			return false
		}
	}
	return true
}

// BeginRequest appends a REQUEST's header and fixed fields; the caller
// appends the message and calls EndFrame(b, start). The method must be valid
// (ValidMethod).
func BeginRequest(b []byte, requestID, timeoutMS uint32, method string) ([]byte, int) {
	out, start := BeginFrame(b, Request, requestID)
	out = binary.BigEndian.AppendUint32(out, timeoutMS)
	out = append(out, byte(len(method)))
	out = append(out, method...)
	return out, start
}

// RequestFields is REQUEST's payload, for tests that play the server.
type RequestFields struct {
	TimeoutMS uint32
	Method    string
	Message   []byte
}

// ParseRequest decodes a REQUEST payload.
func ParseRequest(p []byte) (RequestFields, error) {
	if len(p) < requestFixedSize {
		return RequestFields{}, violation("malformed REQUEST frame: shorter than timeout and method length")
	}
	n := int(p[4])
	if n == 0 || requestFixedSize+n > len(p) {
		return RequestFields{}, violation("malformed REQUEST frame: method length %d", n)
	}
	method := string(p[requestFixedSize : requestFixedSize+n])
	if !ValidMethod(method) {
		return RequestFields{}, violation("malformed REQUEST frame: method is not printable ASCII")
	}
	return RequestFields{TimeoutMS: binary.BigEndian.Uint32(p), Method: method, Message: p[requestFixedSize+n:]}, nil
}

// ErrorFields are an ERROR frame's payload (section 3.7).
type ErrorFields struct {
	Status  uint8
	Message string
	Details []byte
}

// AppendError appends a whole ERROR frame (tests play the server with it).
// A message above 65,535 bytes is cut at a character boundary.
func AppendError(b []byte, requestID uint32, e ErrorFields) []byte {
	out, start := BeginFrame(b, Error, requestID)
	msg := cutUTF8(e.Message, maxTextSize)
	out = append(out, e.Status)
	out = binary.BigEndian.AppendUint16(out, uint16(len(msg)))
	out = append(out, msg...)
	out = append(out, e.Details...)
	EndFrame(out, start)
	return out
}

// ParseError decodes an ERROR payload.
func ParseError(p []byte) (ErrorFields, error) {
	if len(p) < errorFixedSize {
		return ErrorFields{}, violation("malformed ERROR frame: shorter than status and message length")
	}
	status := p[0]
	if status < firstStatusInErrorFrame || status > lastStatusInErrorFrame {
		return ErrorFields{}, violation("malformed ERROR frame: status code %d is not in 1...16", status)
	}
	n := int(binary.BigEndian.Uint16(p[1:3]))
	if errorFixedSize+n > len(p) {
		return ErrorFields{}, violation("malformed ERROR frame: message length %d runs past the payload", n)
	}
	msg := p[errorFixedSize : errorFixedSize+n]
	if !utf8.Valid(msg) {
		return ErrorFields{}, violation("malformed ERROR frame: message is not valid UTF-8")
	}
	return ErrorFields{Status: status, Message: string(msg), Details: p[errorFixedSize+n:]}, nil
}

// GoAwayFields are a GOAWAY frame's payload (section 3.10).
type GoAwayFields struct {
	LastRequestID uint32
	Code          GoAwayCode
	Reason        string
}

// AppendGoAway appends a whole GOAWAY frame; a reason above 65,535 bytes is
// cut at a character boundary.
func AppendGoAway(b []byte, g GoAwayFields) []byte {
	out, start := BeginFrame(b, GoAway, 0)
	reason := cutUTF8(g.Reason, maxTextSize)
	out = binary.BigEndian.AppendUint32(out, g.LastRequestID)
	out = binary.BigEndian.AppendUint32(out, uint32(g.Code))
	out = binary.BigEndian.AppendUint16(out, uint16(len(reason)))
	out = append(out, reason...)
	EndFrame(out, start)
	return out
}

// ParseGoAway decodes a GOAWAY payload; no bytes may follow the reason.
func ParseGoAway(p []byte) (GoAwayFields, error) {
	if len(p) < goAwayFixedSize {
		return GoAwayFields{}, violation("malformed GOAWAY frame: shorter than 10 bytes")
	}
	n := int(binary.BigEndian.Uint16(p[8:10]))
	if goAwayFixedSize+n != len(p) {
		return GoAwayFields{}, violation("malformed GOAWAY frame: reason length %d does not match the payload of %d bytes", n, len(p))
	}
	reason := p[goAwayFixedSize:]
	if !utf8.Valid(reason) {
		return GoAwayFields{}, violation("malformed GOAWAY frame: reason is not valid UTF-8")
	}
	return GoAwayFields{
		LastRequestID: binary.BigEndian.Uint32(p[0:4]),
		Code:          GoAwayCode(binary.BigEndian.Uint32(p[4:8])),
		Reason:        string(reason),
	}, nil
}

// AppendCancel appends a CANCEL frame (empty payload).
func AppendCancel(b []byte, requestID uint32) []byte {
	return AppendHeader(b, Header{Type: Cancel, RequestID: requestID})
}

// AppendPing appends a PING frame carrying data.
func AppendPing(b []byte, data [PingSize]byte) []byte {
	b = AppendHeader(b, Header{Length: PingSize, Type: Ping})
	return append(b, data[:]...)
}

// AppendPong appends the PONG that answers a PING carrying data.
func AppendPong(b []byte, data [PingSize]byte) []byte {
	b = AppendHeader(b, Header{Length: PingSize, Type: Pong})
	return append(b, data[:]...)
}

// ParsePing decodes a PING or PONG payload: exactly 8 bytes.
func ParsePing(t FrameType, p []byte) ([PingSize]byte, error) {
	var data [PingSize]byte
	if len(p) != PingSize {
		return data, violation("malformed %s frame: payload is %d bytes, not 8", t, len(p))
	}
	copy(data[:], p)
	return data, nil
}

// ErrShortFrame is returned by ReadFrame when the stream ends inside a frame.
var ErrShortFrame = errors.New("the connection ended inside a frame")

// ReadFrame reads one whole frame sent by a server. The header is checked
// (CheckFromServer) before the payload is read, so an oversized frame is
// refused without buffering it. io.EOF means the stream ended cleanly
// between frames.
func ReadFrame(r *bufio.Reader, maxFrameSize uint32) (Frame, error) {
	var hb [HeaderSize]byte
	if n, err := io.ReadFull(r, hb[:]); err != nil {
		if err == io.EOF && n == 0 {
			return Frame{}, io.EOF
		}
		if err == io.ErrUnexpectedEOF {
			return Frame{}, ErrShortFrame
		}
		return Frame{}, err
	}
	h := ParseHeader(hb[:])
	if err := h.CheckFromServer(maxFrameSize); err != nil {
		return Frame{}, err
	}
	f := Frame{Header: h}
	if h.Length > 0 {
		f.Payload = make([]byte, h.Length)
		if _, err := io.ReadFull(r, f.Payload); err != nil {
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				return Frame{}, ErrShortFrame
			}
			return Frame{}, err
		}
	}
	return f, nil
}

// cutUTF8 shortens s to at most n bytes without splitting a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
