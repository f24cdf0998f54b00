public import LabKernel
import Orch8Wire

/// The seed's `DeviceContext`: who the device is, sent with telemetry batches and at
/// registration (`setDeviceContext`).
public struct DeviceContext: Equatable, Sendable {
    public var deviceID: String
    public var osName: String
    public var osVersion: String
    public var appVersion: String
    public var sdkVersion: String

    public init(deviceID: String, osName: String = "", osVersion: String = "", appVersion: String = "", sdkVersion: String = "") {
        self.deviceID = deviceID
        self.osName = osName
        self.osVersion = osVersion
        self.appVersion = appVersion
        self.sdkVersion = sdkVersion
    }

    /// The wire form (`{device_id, os_name, os_version, app_version, sdk_version}`).
    public var json: JSONValue {
        ["device_id": .string(deviceID), "os_name": .string(osName), "os_version": .string(osVersion),
         "app_version": .string(appVersion), "sdk_version": .string(sdkVersion)]
    }
}

extension MobileEngine {
    /// `setDeviceContext`: an empty SDK version is filled from the config's.
    public mutating func setDeviceContext(_ context: DeviceContext) {
        var context = context
        if context.sdkVersion.isEmpty { context.sdkVersion = config.sdkVersion }
        deviceContext = context
    }

    /// `registerHandler` after creation: sequences naming the handler load from now on.
    /// (The seed asks for it before `resume()`; a later registration is accepted too,
    /// since nothing that already loaded can have used it.)
    public mutating func registerHandler(_ name: String) { handlers.insert(name) }

    /// `loadSequencesFromUrl`'s second half: a JSON array of sequence definitions, each
    /// loaded as `loadSequence(json:)` would. Definitions that fail are reported with their
    /// index and the rest still load; a document that is not an array loads nothing.
    public mutating func loadSequences(jsonArray text: String, into effects: inout [EngineEffect]) throws(MobileEngineError) -> SequenceListLoad {
        guard !isShutdown else { throw .shutdown }
        let (bound, overflow) = Int(clamping: config.maxSequenceSizeBytes).multipliedReportingOverflow(by: Int(max(1, config.maxStoredSequences)))
        guard overflow || text.utf8.count <= bound else {
            throw .invalidInput("the sequence list is larger than maxStoredSequences × maxSequenceSizeBytes")
        }
        guard case .array(let items)? = try? JSONValue.parse(text) else {
            throw .invalidInput("the sequence list is not a JSON array of sequence definitions")
        }
        var result = SequenceListLoad()
        for (index, item) in items.enumerated() {
            guard case .object = item else {
                result.problems.append("[\(index)]: not a JSON object")
                continue
            }
            do {
                result.loaded.append(try loadSequence(json: item.canonicalText, into: &effects))
            } catch {
                result.problems.append("[\(index)]: \(error)")
            }
        }
        return result
    }
}

/// What `loadSequences(jsonArray:)` did: the seed returns the count, `loaded.count`.
public struct SequenceListLoad: Equatable, Sendable {
    public var loaded: [SequenceInfo] = []
    /// One line per definition that did not load, with its index in the list.
    public var problems: [String] = []

    public init() {}
}
