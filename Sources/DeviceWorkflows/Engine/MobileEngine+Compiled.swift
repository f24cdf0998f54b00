import LabKernel
public import Orch8Wire

/// A sequence validated and compiled once, to load into many engines: a simulated fleet
/// loads the same few sequences at every app launch of every device, and parsing their
/// JSON each time would cost more than running them.
public struct CompiledSequence: Sendable {
    let program: Program

    /// Validates `json` against `handlers` (nil: any handler name), as `loadSequence(json:)` would.
    public init(json: String, handlers: Set<String>?, maxSizeBytes: Int = 1_048_576) throws(MobileEngineError) {
        let loader = SequenceLoader(registeredHandlers: handlers, maxSizeBytes: maxSizeBytes)
        do { program = Program(sequence: try loader.load(json).sequence, json: json) } catch { throw .invalidSequence(error) }
    }

    public var name: String { program.sequence.name }
    public var version: Int { program.sequence.version }
    public var json: String { program.json }
    public var definition: SequenceDefinition { program.sequence }
}

extension MobileEngine {
    /// Loads an already compiled sequence. Its handlers must be registered on this engine
    /// and its JSON within `maxSequenceSizeBytes`, as for `loadSequence(json:)`.
    @discardableResult
    public mutating func loadSequence(_ compiled: CompiledSequence, into effects: inout [EngineEffect]) throws(MobileEngineError) -> SequenceInfo {
        guard !isShutdown else { throw .shutdown }
        let sequence = compiled.program.sequence
        if let missing = sequence.handlers.first(where: { !handlers.contains($0) }) {
            throw .invalidInput("sequence \(sequence.name) uses handler '\(missing)', which is not registered")
        }
        guard compiled.json.utf8.count <= Int(config.maxSequenceSizeBytes) else {
            throw .invalidInput("sequence \(sequence.name) is \(compiled.json.utf8.count) bytes (maxSequenceSizeBytes is \(config.maxSequenceSizeBytes))")
        }
        try install(compiled.program, into: &effects)
        return SequenceInfo(name: sequence.name, version: sequence.version, handlers: sequence.handlers)
    }
}
