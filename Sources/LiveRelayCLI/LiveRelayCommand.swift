import ArgumentParser
import Foundation

/// `liverelay`: the server (`serve`) and one subcommand per RPC.
///
/// One binary for both, so the commands in the README that start a server
/// and talk to it need nothing else installed, and so the client subcommands
/// exercise the same `LiveRelayClient` library that services embed.
@main
struct LiveRelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "liverelay",
        abstract: "LiveRelay, a Live Activity push gateway: run the server or call it.",
        discussion: """
            Client subcommands print the reply as JSON on stdout. On failure they print
            `error: <STATUS>: <message>` on stderr and exit with 1 + the status code
            (e.g. 6 for NOT_FOUND); local problems (unreadable files) exit with 1.
            """,
        subcommands: [
            Serve.self, RegisterToken.self, StartActivity.self, UpdateActivity.self, EndActivity.self, Ping.self,
            MockAPNsCommand.self,
            Bench.self,
            Soak.self,
            AdminCommand.self,
            ChannelsCommand.self,
            EventsCommand.self,
        ]
    )
}

/// Unbuffered, so a line is visible at once even when stdout is a file or a
/// pipe (where `print` buffers until exit, and a killed server shows nothing).
func writeStandardOutput(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}
