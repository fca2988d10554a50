import Testing

@testable import LiveRelayMessages

@Suite struct JSONValidatorTests {
    @Test(arguments: [
        "{}", " { } ", #"{"a":1}"#, #"{"a":[1,2,{"b":null}],"c":true,"d":false}"#,
        #"{"n":-0.5e+10,"m":0,"k":1E5,"j":-12.25}"#, #"{"s":"\"\\\/\b\f\n\r\t\u00e9"}"#,
        #"{"emoji":"\ud83d\ude00","raw":"😀 é"}"#, "\t\n\r{\"a\" : [ ] }\n", #"{"":""}"#,
        #"{"a":{"a":{"a":{}}}}"#,
    ])
    func validObjects(text: String) {
        #expect(JSONValidator.check(text) == .object, "\(text)")
    }

    @Test(arguments: ["[]", "1", #""s""#, "null", "true", "[{}]", " -1.5 "])
    func validButNotObjects(text: String) {
        #expect(JSONValidator.check(text) == .notObject, "\(text)")
    }

    @Test(arguments: [
        ("", "empty document"),
        ("   ", "empty document"),
        ("{", "unexpected end"),
        (#"{"a":1"#, "unexpected end"),
        (#"{"a":1,}"#, "trailing comma"),
        ("[1,]", "trailing comma in array"),
        (#"{"a" 1}"#, "missing colon"),
        (#"{a:1}"#, "unquoted key"),
        (#"{"a":1}}"#, "extra close"),
        (#"{"a":1} x"#, "trailing garbage"),
        (#"{} {}"#, "two documents"),
        (#"{"a":01}"#, "leading zero"),
        (#"{"a":1.}"#, "no digit after point"),
        (#"{"a":.5}"#, "no digit before point"),
        (#"{"a":1e}"#, "empty exponent"),
        (#"{"a":-}"#, "lone minus"),
        (#"{"a":+1}"#, "plus sign"),
        (#"{"a":0x10}"#, "hex number"),
        (#"{"a":NaN}"#, "NaN"),
        (#"{"a":Infinity}"#, "Infinity"),
        (#"{"a":tru}"#, "short literal"),
        (#"{"a":nul}"#, "short null"),
        (#"{"a":True}"#, "capital literal"),
        (#"{"a":"\x"}"#, "invalid escape"),
        (#"{"a":"\u12"}"#, "short unicode escape"),
        (#"{"a":"\u12G4"}"#, "bad hex digit"),
        (#"{"a":"\ud83d"}"#, "lone high surrogate"),
        (#"{"a":"\ud83dx"}"#, "high surrogate then text"),
        (#"{"a":"\ud83d\u0041"}"#, "high surrogate then non-low"),
        (#"{"a":"\ude00"}"#, "lone low surrogate"),
        ("{\"a\":\"tab\there\"}", "raw control character"),
        ("{\"a\":\"nul\u{0}\"}", "raw NUL"),
        (#"{"a":"unterminated}"#, "unterminated string"),
        (#"{'a':1}"#, "single quotes"),
        ("{\"a\":1}\u{0}", "NUL after document"),
        ("\u{FEFF}{}", "byte order mark"),
        ("{\u{A0}}", "non-breaking space"),
        ("{/*c*/}", "comment"),
        (#"{"a":[1 2]}"#, "missing comma"),
        (#"{"a":1 "b":2}"#, "missing comma in object"),
        (#"{"a":1,"b"}"#, "member without value"),
        ("[", "open array"),
    ])
    func invalidDocuments(text: String, why: String) {
        guard case .invalid = JSONValidator.check(text) else {
            Issue.record("accepted \(why): \(text)")
            return
        }
    }

    @Test func depthLimit() {
        let ok = String(repeating: "[", count: 31) + String(repeating: "]", count: 31)
        #expect(JSONValidator.check("{\"a\":" + ok + "}") == .object)  // depth 32
        let deep = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        #expect(JSONValidator.check("{\"a\":" + deep + "}") == .invalid(offset: 36, reason: "nesting too deep"))
        let veryDeep = String(repeating: "{\"a\":", count: 10_000)
        guard case .invalid = JSONValidator.check(veryDeep) else {
            Issue.record("10,000 levels accepted")
            return
        }
    }

    @Test func errorOffsets() {
        #expect(JSONValidator.check(#"{"a":1,}"#) == .invalid(offset: 7, reason: "expected a member name"))
        #expect(JSONValidator.check(#"{"a":1} x"#) == .invalid(offset: 8, reason: "trailing characters after the document"))
    }

    @Test func nonContiguousStringsAreChecked() {
        // A bridged or lazily-built string may not expose contiguous UTF-8; force the fallback path.
        let text = String(decoding: Array(#"{"k":[1,2,3]}"#.utf8), as: UTF8.self)
        #expect(JSONValidator.check(text) == .object)
    }
}
