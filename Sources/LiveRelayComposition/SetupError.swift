/// A server that cannot be set up as described (an unreadable key, a store that
/// does not open, a port in use): reported to the operator as one `error: ...`
/// line, naming the setting at fault.
package struct SetupError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}
