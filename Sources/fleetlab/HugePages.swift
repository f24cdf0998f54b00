import Foundation

/// Simulations run on 2 MiB pages where the kernel offers them on request.
///
/// Why. A simulation of a large fleet keeps gigabytes of small objects (the phones'
/// engines, stores and sync state) and touches them in no order a cache can follow, so a
/// good part of its time is the processor walking page tables. Linux's transparent huge
/// pages cut those walks by 512, but most distributions ship them in `madvise` mode: only
/// memory a program asks for gets them, and glibc's allocator asks only when the
/// `glibc.malloc.hugetlb=1` tunable is in the environment at start. `simulate` and
/// `sweep` therefore re-execute themselves once with it (`execv` keeps the process id,
/// arguments and descriptors). The results do not change: only where memory lies does.
/// Measured in docs/benchmarks.md ("Huge pages"): a million phones' morning 20 % faster.
///
/// Not for the other commands: the servers and load generators are small, and `bench`
/// reports memory per device against a budget measured without them.
/// `FLEETLAB_HUGE_PAGES=0` turns it off.
enum HugePages {
    static let tunable = "glibc.malloc.hugetlb=1"
    static let commands: Set<String> = ["simulate", "sweep"]

    /// The `GLIBC_TUNABLES` value to re-execute with, or nil to run as started: only for
    /// `commands`, only when the kernel's mode is `madvise` (with `always` every program
    /// has them already, with `never` none can), and never twice.
    static func tunables(arguments: [String], environment: [String: String], kernelMode: String?) -> String? {
        guard arguments.count > 1, commands.contains(arguments[1]) else { return nil }
        guard environment["FLEETLAB_HUGE_PAGES"] != "0" else { return nil }
        guard let kernelMode, kernelMode.contains("[madvise]") else { return nil }
        let current = environment["GLIBC_TUNABLES"] ?? ""
        if current.contains("glibc.malloc.hugetlb") { return nil }
        return current.isEmpty ? tunable : current + ":" + tunable
    }

    /// Re-executes this program with huge pages when `tunables` says so; returns if it
    /// should not, or if the exec fails (the run goes on as it would have).
    static func adopt() {
        #if os(Linux)
        let mode = try? String(contentsOfFile: "/sys/kernel/mm/transparent_hugepage/enabled", encoding: .utf8)
        guard let value = tunables(arguments: CommandLine.arguments, environment: ProcessInfo.processInfo.environment, kernelMode: mode)
        else { return }
        setenv("GLIBC_TUNABLES", value, 1)
        let argv = CommandLine.arguments.map { strdup($0) } + [nil]
        execv("/proc/self/exe", argv)
        // Only a failed exec returns: run without.
        unsetenv("GLIBC_TUNABLES")
        #endif
    }
}
