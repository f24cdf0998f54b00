public import LabKernel
public import DeviceWorkflows
import Orch8Wire

/// The seed's device-facing calls that need more than the engine: a handler body, a URL.
extension EngineHost {
    /// `registerHandler(name, handler)` after creation.
    public mutating func registerHandler(_ name: String, _ handler: @escaping BuiltinHandler) {
        handlers[name] = handler
        handlerLookup.register(name, handler)
        engine.registerHandler(name)
    }

    /// `setDeviceContext(context)`.
    public mutating func setDeviceContext(_ context: DeviceContext) { engine.setDeviceContext(context) }

    /// `loadSequencesFromUrl(url)`: "" means `config.sequencesUrl`. The driver performs
    /// the GET (`fetch`); a non-200 answer or an unreachable URL is an error, and so is a
    /// body that is not a JSON array of definitions.
    public mutating func loadSequences(fromURL url: String, fetch: (ManifestFetch) throws -> ManifestFetchReply) throws -> SequenceListLoad {
        let target = url.isEmpty ? engine.config.sequencesUrl : url
        guard !target.isEmpty else { throw MobileEngineError.invalidInput("no URL given and config.sequencesUrl is empty") }
        let reply: ManifestFetchReply
        do { reply = try fetch(ManifestFetch(url: target, headers: [:])) } catch {
            throw MobileEngineError.invalidInput("cannot fetch \(target): \(error)")
        }
        guard reply.status == 200 else { throw MobileEngineError.invalidInput("\(target) answered HTTP \(reply.status)") }
        let text = String(decoding: reply.body, as: UTF8.self)
        return try calling { engine, effects in try engine.loadSequences(jsonArray: text, into: &effects) }
    }
}
