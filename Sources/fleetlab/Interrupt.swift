import Foundation

/// Ctrl-C during a simulation: stop at the next progress check, keep what was simulated,
/// and write the results and dashboard for it.
enum Interrupt {
    nonisolated(unsafe) static var requested: sig_atomic_t = 0

    static func install() {
        // A parent may have started us with SIGINT blocked (some process launchers do);
        // Ctrl-C must still reach the handler.
        var mask = sigset_t()
        sigemptyset(&mask)
        sigaddset(&mask, SIGINT)
        sigprocmask(SIG_UNBLOCK, &mask, nil)
        signal(SIGINT) { _ in
            if Interrupt.requested != 0 { _exit(ExitStatus.interrupted) }  // a second Ctrl-C leaves at once
            Interrupt.requested = 1
        }
    }

    static var isRequested: Bool { requested != 0 }

    /// Returns once SIGINT or SIGTERM arrives (a long-running command's main loop).
    static func wait() async {
        install()
        signal(SIGTERM) { _ in Interrupt.requested = 1 }
        while !isRequested { try? await Task.sleep(for: .milliseconds(100)) }
    }
}
