import CFuzzerDriver
import FuzzSupport

// A libFuzzer target (built with -sanitize=fuzzer,address -parse-as-library; see scripts/fuzz.sh).
// Input: byte 0 picks a broadcast channel request type (CreateChannel, ListChannels,
// DeleteChannel, by byte % 3), the rest are that request's bytes.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    fuzzChannelRequest(data, size)
    return 0
}

/// With LIVERELAY_FUZZ_WRITE_SEEDS set, writes this target's Swift-built seeds and exits.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(
    _ argc: UnsafeMutablePointer<Int32>?,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?
) -> Int32 {
    Seeds.writeIfRequested(target: "FuzzChannelRequest", Seeds.channelRequests)
    return 0
}

/// The process entry point SwiftPM links in as main(): hands over to libFuzzer's driver.
@_cdecl("FuzzChannelRequest_main")
public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, fuzzOneInput)
}
