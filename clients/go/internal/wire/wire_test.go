package wire

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
)

// unhex reads a hex dump as docs/PROTOCOL.md section 12 prints them: the
// leading two-digit hex words of each line; the rest is commentary.
func unhex(t *testing.T, dump string) []byte {
	t.Helper()
	var out []byte
	for _, line := range strings.Split(strings.TrimSpace(dump), "\n") {
		for _, word := range strings.Fields(line) {
			b, err := hex.DecodeString(word)
			if len(word) != 2 || err != nil {
				break
			}
			out = append(out, b...)
		}
	}
	return out
}

const clientToServer = `
4C 52 50 43 0D 0A 1A 0A                            preface "LRPC\r\n\x1a\n"
00 00 00 1C 01 00 00 00 00 00                      HELLO header: length 28, type 1, flags 0, id 0
00 01 00 01                                        min_version 1, max_version 1
00 0B 6C 72 5F 64 65 6D 6F 5F 6B 65 79             api_key_length 11, "lr_demo_key"
04 64 65 6D 6F                                     client_name_length 4, "demo"
00 01 00 10 00 00                                  MAX_FRAME_SIZE = 1048576
00 00 00 25 03 00 00 00 00 01                      REQUEST header: length 37, type 3, id 1
00 00 13 88                                        timeout_ms 5000
1C 2F 6C 69 76 65 72 65 6C 61 79 2E 76 31 2E 4C    method_length 28, "/liverelay.v1.L
69 76 65 52 65 6C 61 79 2F 50 69 6E 67                iveRelay/Ping"
0A 02 68 69                                        PingRequest: field 1 (payload) = "hi"
`

const serverToClient = `
00 00 00 14 02 00 00 00 00 00                      WELCOME header: length 20, type 2, id 0
00 01                                              version 1
00 01 00 10 00 00                                  MAX_FRAME_SIZE = 1048576
00 02 00 00 00 64                                  MAX_REQUESTS_IN_FLIGHT = 100
00 03 00 04 93 E0                                  IDLE_TIMEOUT_MS = 300000
00 00 00 10 04 00 00 00 00 01                      RESPONSE header: length 16, type 4, id 1
0A 02 68 69                                        PingReply: payload = "hi"
10 80 D0 95 FF BC 31                                          server_time_ms = 1700000000000
1A 03 31 2E 30                                                server_version = "1.0"
`

const errorExample = `
00 00 00 16 05 00 00 00 00 01                      ERROR header: length 22, type 5, id 1
05                                                 status 5 NOT_FOUND
00 10 6E 6F 20 73 75 63 68 20 61 63 74 69 76 69    message_length 16, "no such activi
74 79                                                 ty"
1A 01 78                                           ErrorDetails: field 3 (reason) = "x"
`

// The PingRequest and PingReply of the example, encoded by hand (the codec
// does not depend on protobuf).
var (
	pingRequestHi = []byte{0x0A, 0x02, 0x68, 0x69}
	pingReplyHi   = []byte{0x0A, 0x02, 0x68, 0x69, 0x10, 0x80, 0xD0, 0x95, 0xFF, 0xBC, 0x31, 0x1A, 0x03, 0x31, 0x2E, 0x30}
)

func TestClientBytesOfTheDocumentExample(t *testing.T) {
	out, err := AppendHello(append([]byte(nil), Magic[:]...), HelloFields{
		MinVersion: 1, MaxVersion: 1, APIKey: []byte("lr_demo_key"), ClientName: "demo",
		Settings: []SettingPair{{ID: SettingMaxFrameSize, Value: 1048576}},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, start := BeginRequest(out, 1, 5000, "/liverelay.v1.LiveRelay/Ping")
	out = append(out, pingRequestHi...)
	EndFrame(out, start)
	if want := unhex(t, clientToServer); !bytes.Equal(out, want) {
		t.Fatalf("client bytes\n got %X\nwant %X", out, want)
	}
}

func TestServerBytesOfTheDocumentExample(t *testing.T) {
	data := unhex(t, serverToClient)
	r := bufio.NewReader(bytes.NewReader(data))
	welcome, err := ReadFrame(r, DefaultMaxFrameSize)
	if err != nil || welcome.Type != Welcome || welcome.RequestID != 0 {
		t.Fatalf("first frame %+v, %v", welcome.Header, err)
	}
	w, s, err := ParseWelcome(welcome.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if w.Version != 1 || s != (ServerSettings{MaxFrameSize: 1048576, MaxRequestsInFlight: 100, IdleTimeoutMS: 300000}) {
		t.Fatalf("WELCOME version %d settings %+v", w.Version, s)
	}
	resp, err := ReadFrame(r, DefaultMaxFrameSize)
	if err != nil || resp.Type != Response || resp.RequestID != 1 || !bytes.Equal(resp.Payload, pingReplyHi) {
		t.Fatalf("second frame %+v payload %X, %v", resp.Header, resp.Payload, err)
	}
	if _, err := ReadFrame(r, DefaultMaxFrameSize); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	// And the encoder makes the same bytes.
	again := AppendWelcome(nil, w)
	again, start := BeginFrame(again, Response, 1)
	again = append(again, pingReplyHi...)
	EndFrame(again, start)
	if !bytes.Equal(again, data) {
		t.Fatalf("re-encoded\n got %X\nwant %X", again, data)
	}
}

func TestErrorFrameOfTheDocumentExample(t *testing.T) {
	data := unhex(t, errorExample)
	f, err := ReadFrame(bufio.NewReader(bytes.NewReader(data)), DefaultMaxFrameSize)
	if err != nil || f.Type != Error || f.RequestID != 1 {
		t.Fatalf("frame %+v, %v", f.Header, err)
	}
	e, err := ParseError(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != 5 || e.Message != "no such activity" || !bytes.Equal(e.Details, []byte{0x1A, 0x01, 0x78}) {
		t.Fatalf("parsed %+v", e)
	}
	if made := AppendError(nil, 1, e); !bytes.Equal(made, data) {
		t.Fatalf("re-encoded\n got %X\nwant %X", made, data)
	}
}

func TestOtherFramesOfTheDocument(t *testing.T) {
	if got, want := AppendCancel(nil, 9), unhex(t, "00 00 00 00 06 00 00 00 00 09"); !bytes.Equal(got, want) {
		t.Errorf("CANCEL %X, want %X", got, want)
	}
	data := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	if got, want := AppendPing(nil, data), unhex(t, "00 00 00 08 07 00 00 00 00 00 01 02 03 04 05 06 07 08"); !bytes.Equal(got, want) {
		t.Errorf("PING %X, want %X", got, want)
	}
	if got, want := AppendPong(nil, data), unhex(t, "00 00 00 08 08 00 00 00 00 00 01 02 03 04 05 06 07 08"); !bytes.Equal(got, want) {
		t.Errorf("PONG %X, want %X", got, want)
	}
	goaway := unhex(t, "00 00 00 0D 09 00 00 00 00 00 00 00 00 05 00 00 00 00 00 03 62 79 65")
	if got := AppendGoAway(nil, GoAwayFields{LastRequestID: 5, Code: NoError, Reason: "bye"}); !bytes.Equal(got, goaway) {
		t.Errorf("GOAWAY %X, want %X", got, goaway)
	}
	f, err := ReadFrame(bufio.NewReader(bytes.NewReader(goaway)), DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	g, err := ParseGoAway(f.Payload)
	if err != nil || g != (GoAwayFields{LastRequestID: 5, Code: NoError, Reason: "bye"}) {
		t.Fatalf("GOAWAY parsed %+v, %v", g, err)
	}
	p, err := ParsePing(Pong, data[:])
	if err != nil || p != data {
		t.Fatalf("PONG parsed %v, %v", p, err)
	}
}

func violationOf(t *testing.T, err error) *Violation {
	t.Helper()
	var v *Violation
	if !errors.As(err, &v) {
		t.Fatalf("error %v is not a *Violation", err)
	}
	return v
}

func TestHeaderChecksFromTheHeaderAlone(t *testing.T) {
	cases := []struct {
		name   string
		header Header
		code   GoAwayCode
		reason string
	}{
		{"unknown type", Header{Type: 0x0A}, ProtocolError, "unknown frame type 0x0A"},
		{"unknown type zero", Header{Type: 0x00}, ProtocolError, "unknown frame type 0x00"},
		{"above MAX_FRAME_SIZE", Header{Length: DefaultMaxFrameSize + 1, Type: Response, RequestID: 1}, FrameSizeError, "above MAX_FRAME_SIZE"},
		{"response with id 0", Header{Type: Response}, ProtocolError, "RESPONSE frame with request id 0"},
		{"ping with an id", Header{Length: 8, Type: Ping, RequestID: 3}, ProtocolError, "PING frame with request id 3"},
		{"request from the server", Header{Type: Request, RequestID: 1}, ProtocolError, "REQUEST frame from the server"},
		{"hello from the server", Header{Type: Hello}, ProtocolError, "HELLO frame from the server"},
		{"cancel from the server", Header{Type: Cancel, RequestID: 2}, ProtocolError, "CANCEL frame from the server"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := violationOf(t, tc.header.CheckFromServer(DefaultMaxFrameSize))
			if v.Code != tc.code || !strings.Contains(v.Reason, tc.reason) {
				t.Fatalf("got %v, want %s containing %q", v, tc.code, tc.reason)
			}
		})
	}
	for _, ok := range []Header{
		{Type: Welcome}, {Type: Response, RequestID: 1}, {Length: 8, Type: Ping}, {Length: 8, Type: Pong},
		{Length: DefaultMaxFrameSize, Type: Error, RequestID: 7}, {Length: 10, Type: GoAway},
	} {
		if err := ok.CheckFromServer(DefaultMaxFrameSize); err != nil {
			t.Errorf("%+v refused: %v", ok, err)
		}
	}
}

func TestReadFrameRefusesAnOversizedFrameWithoutItsPayload(t *testing.T) {
	// Only the header is there: the check must not wait for the payload.
	header := AppendHeader(nil, Header{Length: 2 << 20, Type: Response, RequestID: 1})
	_, err := ReadFrame(bufio.NewReader(bytes.NewReader(header)), DefaultMaxFrameSize)
	if v := violationOf(t, err); v.Code != FrameSizeError {
		t.Fatalf("got %v", v)
	}
}

func TestReadFrameReportsATruncatedFrame(t *testing.T) {
	frame := AppendGoAway(nil, GoAwayFields{Reason: "bye"})
	for cut := 1; cut < len(frame); cut++ {
		_, err := ReadFrame(bufio.NewReader(bytes.NewReader(frame[:cut])), DefaultMaxFrameSize)
		if err != ErrShortFrame {
			t.Fatalf("cut at %d: %v, want ErrShortFrame", cut, err)
		}
	}
}

func TestPayloadDecodersRefuseMalformedPayloads(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		reason string
	}{
		{"ERROR status 0", second(ParseError([]byte{0, 0, 0})), "status code 0 is not in 1...16"},
		{"ERROR status 17", second(ParseError([]byte{17, 0, 0})), "status code 17 is not in 1...16"},
		{"ERROR too short", second(ParseError([]byte{5, 0})), "shorter than status"},
		{"ERROR message past the end", second(ParseError([]byte{5, 0, 9, 'a'})), "runs past the payload"},
		{"ERROR message not UTF-8", second(ParseError([]byte{5, 0, 1, 0xFF})), "not valid UTF-8"},
		{"GOAWAY bytes after the reason", second(ParseGoAway(append(AppendGoAway(nil, GoAwayFields{Reason: "x"})[HeaderSize:], '!'))), "does not match"},
		{"GOAWAY too short", second(ParseGoAway(make([]byte, 9))), "shorter than 10 bytes"},
		{"GOAWAY reason not UTF-8", second(ParseGoAway([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xC3})), "not valid UTF-8"},
		{"WELCOME without version", third(ParseWelcome([]byte{1})), "version missing"},
		{"WELCOME settings not a multiple of 6", third(ParseWelcome([]byte{0, 1, 0, 1, 0})), "not a multiple of 6"},
		{"WELCOME MAX_FRAME_SIZE too small", third(ParseWelcome(AppendSettings([]byte{0, 1}, []SettingPair{{SettingMaxFrameSize, 100}}))), "MAX_FRAME_SIZE 100"},
		{"WELCOME MAX_FRAME_SIZE too large", third(ParseWelcome(AppendSettings([]byte{0, 1}, []SettingPair{{SettingMaxFrameSize, MaxMaxFrameSize + 1}}))), "MAX_FRAME_SIZE 16777216"},
		{"WELCOME MAX_REQUESTS_IN_FLIGHT 0", third(ParseWelcome(AppendSettings([]byte{0, 1}, []SettingPair{{SettingMaxRequestsInFlight, 0}}))), "MAX_REQUESTS_IN_FLIGHT is 0"},
		{"PING of 7 bytes", second(ParsePing(Ping, make([]byte, 7))), "PING frame: payload is 7 bytes"},
		{"REQUEST with an empty method", second(ParseRequest([]byte{0, 0, 0, 0, 0})), "method length 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := violationOf(t, tc.err)
			if v.Code != ProtocolError || !strings.Contains(v.Reason, tc.reason) {
				t.Fatalf("got %v, want PROTOCOL_ERROR containing %q", v, tc.reason)
			}
		})
	}
}

func TestWelcomeIgnoresUnknownSettingsAndKeepsDefaults(t *testing.T) {
	p := AppendSettings([]byte{0, 1}, []SettingPair{{ID: 0x7777, Value: 0}, {ID: SettingIdleTimeoutMS, Value: 5}})
	w, s, err := ParseWelcome(p)
	if err != nil {
		t.Fatal(err)
	}
	if w.Version != 1 || s.MaxFrameSize != DefaultMaxFrameSize || s.MaxRequestsInFlight != DefaultMaxRequestsInFlight || s.IdleTimeoutMS != 5 {
		t.Fatalf("got %+v %+v", w, s)
	}
}

func TestHelloRefusesFieldsOutOfBoundsWithoutNamingTheKey(t *testing.T) {
	secret := strings.Repeat("k", 513)
	for name, h := range map[string]HelloFields{
		"empty key":     {MinVersion: 1, MaxVersion: 1},
		"key too long":  {MinVersion: 1, MaxVersion: 1, APIKey: []byte(secret)},
		"name too long": {MinVersion: 1, MaxVersion: 1, APIKey: []byte("k"), ClientName: strings.Repeat("n", 256)},
		"versions":      {MinVersion: 2, MaxVersion: 1, APIKey: []byte("k")},
		"too large":     {MinVersion: 1, MaxVersion: 1, APIKey: []byte("k"), Settings: make([]SettingPair, 700)},
	} {
		out, err := AppendHello([]byte("x"), h)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if string(out) != "x" {
			t.Errorf("%s: appended to the buffer on failure", name)
		}
		if strings.Contains(err.Error(), "kkkk") {
			t.Errorf("%s: the error names the key: %v", name, err)
		}
	}
}

func TestTextIsCutAtACharacterBoundary(t *testing.T) {
	long := strings.Repeat("é", 40000) // 80,000 bytes
	f := AppendGoAway(nil, GoAwayFields{Reason: long})
	g, err := ParseGoAway(f[HeaderSize:])
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Reason) != 65534 || !strings.HasPrefix(long, g.Reason) {
		t.Fatalf("reason cut to %d bytes", len(g.Reason))
	}
}

func TestRequestRoundTrip(t *testing.T) {
	out, start := BeginRequest(nil, 42, 1234, "/liverelay.v1.LiveRelay/Ping")
	out = append(out, pingRequestHi...)
	EndFrame(out, start)
	h := ParseHeader(out)
	if h.Type != Request || h.RequestID != 42 || int(h.Length) != len(out)-HeaderSize {
		t.Fatalf("header %+v", h)
	}
	r, err := ParseRequest(out[HeaderSize:])
	if err != nil || r.TimeoutMS != 1234 || r.Method != "/liverelay.v1.LiveRelay/Ping" || !bytes.Equal(r.Message, pingRequestHi) {
		t.Fatalf("parsed %+v, %v", r, err)
	}
	for _, bad := range []string{"", "has space", "caf\u00e9", strings.Repeat("m", 256)} {
		if ValidMethod(bad) {
			t.Errorf("method %q accepted", bad)
		}
	}
}

func TestNames(t *testing.T) {
	if TooManyConnections.String() != "TOO_MANY_CONNECTIONS" || GoAwayCode(99).String() != "UNKNOWN_99" {
		t.Fatal(TooManyConnections, GoAwayCode(99))
	}
	if FrameType(0x0A).String() != "0x0A" || GoAway.String() != "GOAWAY" {
		t.Fatal(FrameType(0x0A), GoAway)
	}
}

func second[T any](_ T, err error) error { return err }

func third[A, B any](_ A, _ B, err error) error { return err }
