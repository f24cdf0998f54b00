public import Foundation

/// Where things are when tests run: the package root, its built products, scratch folders.
public enum TestPaths {
    /// The package root, found from this source file's location.
    public static let packageRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("Package.swift not found above \(#filePath)")
    }()

    /// A new empty directory under the system temporary directory.
    public static func scratchDirectory(_ label: String = "fleetlab-test") -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(label)-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString.prefix(8))")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// The `fleetlab` executable built alongside the tests (`swift test` builds every product).
    public static var fleetlabExecutable: URL {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("fleetlab")
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory), !isDirectory.boolValue,
               FileManager.default.isExecutableFile(atPath: candidate.path) {
                return candidate
            }
            dir.deleteLastPathComponent()
        }
        return packageRoot.appendingPathComponent(".build/debug/fleetlab")
    }
}

/// The JSON of a shipped workflow under simulations/workflows (examples/ included).
public func workflowJSON(_ name: String) -> String {
    let root = TestPaths.packageRoot.appendingPathComponent("simulations/workflows")
    for url in [root.appendingPathComponent("\(name).json"), root.appendingPathComponent("examples/\(name).json")] {
        if let text = try? String(contentsOf: url, encoding: .utf8) { return text }
    }
    fatalError("no workflow \(name)")
}
