// The generated gRPC service code here names the message types of the one shared copy
// (Benchmarks/SwiftProtobufMessages); re-exported so it compiles unedited.
@_exported import SwiftProtobufMessages
