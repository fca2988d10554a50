// The fuzz targets import only FuzzSupport.
@_exported import LiveRelayMessages
@_exported import LiveRelayWire
