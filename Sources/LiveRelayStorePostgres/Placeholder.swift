// LiveRelayStorePostgres: being written (issue work in progress); replaced by its real sources.
import NIOCore
