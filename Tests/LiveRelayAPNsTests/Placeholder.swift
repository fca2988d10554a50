// Replaced by the real tests of this module.
import Testing
